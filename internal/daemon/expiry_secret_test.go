package daemon

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The Secrets' expiry is the earliest certificate among every served
// chain: a key block before a certificate is skipped unread, a trusted CA
// is not a served certificate, and the snapshot a staged rollout still
// serves to the nodes outside its stage counts. A new fleet is read anew.
func TestSecretExpiryIsTheEarliestServedChain(t *testing.T) {
	reg := xdstype.New()
	ca := certstest.NewCA(t, "secret expiry CA")
	issue := func(h time.Duration) certstest.Pair {
		l := certstest.Server("edge")
		l.NotAfter = time.Now().Add(h).Truncate(time.Second)
		return ca.Issue(t, l)
	}
	inBoth, inNext, onlyPrev := issue(10*time.Hour), issue(20*time.Hour), issue(5*time.Hour)
	chain := func(name string, p certstest.Pair, keyFirst bool) *tlsv3.Secret {
		pemText := p.CertPEM
		if keyFirst {
			pemText = append(append([]byte{}, p.KeyPEM...), p.CertPEM...)
		}
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(pemText)}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: p.KeyPEM}},
		}}}
	}
	expiredCA := issue(-time.Hour)
	trusted := &tlsv3.Secret{Name: "old-ca", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: expiredCA.CertPEM}},
	}}}
	next := xdstest.Snapshot(t, reg, chain("both", inBoth, true), chain("next", inNext, false), trusted)
	prev := xdstest.Snapshot(t, reg, chain("both", inBoth, true), chain("prev", onlyPrev, false))

	rules := nodegroup.Groups{{Name: "edge", Default: true, Rollout: &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.5}}}}}
	plain := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{next})
	pub := fleet.NewPublisher()
	source := secretExpiry(pub)
	if at, ok := source(); ok {
		t.Fatalf("nothing published, yet an expiry: %v", at)
	}
	pub.Publish(plain)
	if at, ok := source(); !ok || !at.Equal(inBoth.Cert.NotAfter) {
		t.Errorf("expiry %v (%v), want the earliest served certificate's %v (the expired trusted CA is not served as a certificate)", at, ok, inBoth.Cert.NotAfter)
	}
	pub.Publish(plain.Staged("edge", prev, 1))
	if at, ok := source(); !ok || !at.Equal(onlyPrev.Cert.NotAfter) {
		t.Errorf("during the rollout: expiry %v (%v), want the previous snapshot's %v", at, ok, onlyPrev.Cert.NotAfter)
	}
}

// A new fleet reads only the Secrets it has changed: a Secret of the same
// version is not parsed again (nor the same one in another group), so a
// scrape after each publish costs the changed chains, not every chain.
func TestSecretExpiryReadsOnlyChangedSecrets(t *testing.T) {
	reg := xdstype.New()
	ca := certstest.NewCA(t, "secret cache CA")
	secret := func(name string, h time.Duration) *tlsv3.Secret {
		l := certstest.Server(name)
		l.NotAfter = time.Now().Add(h).Truncate(time.Second)
		p := ca.Issue(t, l)
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: p.CertPEM}},
		}}}
	}
	a, b, b2 := secret("a", 10*time.Hour), secret("b", 20*time.Hour), secret("b", 5*time.Hour)
	rules := nodegroup.Groups{{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}}, {Name: "api", Default: true}}
	fleetOf := func(msgs ...any) *fleet.Fleet {
		s := xdstest.Snapshot(t, reg, msgs...)
		return fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{s, s})
	}
	pub := fleet.NewPublisher()
	e := &secretExpiries{pub: pub}
	steps := []struct {
		what   string
		f      *fleet.Fleet
		parses int // in all
		want   time.Time
	}{
		{"two Secrets in two groups", fleetOf(a, b), 2, time.Now().Add(10 * time.Hour)},
		{"a runtime added", fleetOf(a, b, xdstest.Runtime("extra", "k", 1)), 2, time.Now().Add(10 * time.Hour)},
		{"b renewed", fleetOf(a, b2, xdstest.Runtime("extra", "k", 1)), 3, time.Now().Add(5 * time.Hour)},
	}
	for _, s := range steps {
		pub.Publish(s.f)
		at, ok := e.source()
		if !ok || at.Sub(s.want).Abs() > time.Minute {
			t.Errorf("%s: expiry %v (%v), want %v", s.what, at, ok, s.want)
		}
		if e.parses != s.parses {
			t.Errorf("%s: %d Secrets read in all, want %d", s.what, e.parses, s.parses)
		}
	}
}
