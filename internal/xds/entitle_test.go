package xds

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Streams with the same entitlement serve one shared snapshot less what
// they are denied, built once; everything else in it is what the group's
// snapshot holds, at the same versions.
func TestWithheldSnapshotsAreShared(t *testing.T) {
	reg := xdstype.New()
	srv := New(Options{Registry: reg, Fleets: fleet.NewPublisher()})
	group := world(t, reg, 3, 1000, "c0")
	var inputs []xdstype.Resource
	for _, set := range group.Sets() {
		for _, n := range set.Names() {
			inputs = append(inputs, xdstype.Resource{Type: set.Type(), Name: n, Message: set.Get(n).Message})
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		inputs = append(inputs, xdstype.Resource{Type: reg.Lookup(xdstype.SecretURL), Name: n, Message: &tlsv3.Secret{Name: n,
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: n}}}}}})
	}
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}

	one, two := srv.withhold(snap, []string{"a", "c"}), srv.withhold(snap, []string{"a", "c"})
	if one != two {
		t.Fatal("two streams denied the same Secrets got different snapshots")
	}
	if got := one.snap.Set(xdstype.SecretURL).Names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("withholding a and c left %v", got)
	}
	for _, set := range snap.Sets() {
		if url := set.Type().URL; url != xdstype.SecretURL && one.snap.Set(url) != set {
			// The same *Set, not an equal copy: planning is shared per set.
			t.Fatalf("%s is not the group's own set when only Secrets were withheld", set.Type().Abbrev)
		}
	}
	if all := srv.withhold(snap, nil); all.snap.Set(xdstype.SecretURL).Len() != 0 || all == one {
		t.Fatalf("withholding every Secret left %v", all.snap.Set(xdstype.SecretURL).Names())
	}
}

// What an identity may have of a group snapshot is worked out once per
// fleet, snapshot and identity and shared by its streams; another
// identity, or one differing only in a DNS name past the four
// Identity.String lists, gets its own.
func TestEntitlementSharedPerIdentity(t *testing.T) {
	reg := xdstype.New()
	srv := New(Options{Registry: reg, Fleets: fleet.NewPublisher()})
	snap := secretSnap(t, reg, "a", "b")
	f := fleet.NewGroupedFleet(nodegroup.Groups{{Name: "default", Default: true}}, []*snapshot.Snapshot{snap})
	f.RestrictSecrets(map[string][]string{"a": {"a.example"}})
	g := f.Groups()[0]

	ca := identitytest.NewCA(t, "pylon test CA")
	streamOf := func(dns ...string) *stream {
		leaf := ca.Issue(t, "", dns...)
		return &stream{srv: srv, ident: identity.FromState(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf.Cert}}})}
	}
	four := []string{"w.example", "x.example", "y.example", "z.example"}
	one := streamOf(append(four, "e1.example")...).entitlement(f, g)
	same := streamOf(append(four, "e1.example")...).entitlement(f, g)
	other := streamOf(append(four, "e2.example")...).entitlement(f, g)
	allowed := streamOf("a.example").entitlement(f, g)
	if one != same {
		t.Fatal("two streams of one identity worked out their entitlement each")
	}
	if other == one {
		t.Fatal("identities differing in their fifth DNS name share an entitlement")
	}
	if one.w == nil || !slices.Equal(one.w.names, []string{"a"}) || other.w != one.w {
		t.Fatalf("denied %v and %v, want [a] for both, shared", one.w, other.w)
	}
	if allowed.w != nil || allowed.why != "" {
		t.Fatalf("a.example denied %v (%s)", allowed.w.names, allowed.why)
	}
	if f2 := fleet.NewGroupedFleet(nodegroup.Groups{{Name: "default", Default: true}}, []*snapshot.Snapshot{snap}); streamOf("a.example").entitlement(f2, f2.Groups()[0]).w != nil {
		t.Fatal("a new fleet without the policy kept the old fleet's entitlement")
	}
}
