package fleet

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func withSecret(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	reg := xdstype.New()
	s, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.SecretURL), Name: "k", Message: &tlsv3.Secret{Name: "k",
		Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "ca"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func warnings(es []Exposure) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Group + ": " + e.Warning + "\n")
	}
	return b.String()
}

// Finding 9 of issue 30: a verified node can join another group by
// claiming its metadata or locality and receive that group's Secrets no
// identities restrict. The operator is told which groups are open to it,
// and by which fields.
func TestGroupsPickedByUnboundClaimsAreNamed(t *testing.T) {
	secret := withSecret(t)
	rules := nodegroup.Groups{
		{Name: "payments", Match: nodegroup.Match{Metadata: map[string]string{"team": "payments"}, Zone: "z1"}},
		{Name: "by-id", Match: nodegroup.Match{ID: "pay-*", Cluster: "pay"}},
		{Name: "locked", Match: nodegroup.Match{Metadata: map[string]string{"team": "ops"}}, Identities: []string{"spiffe://example.org/*"}},
		{Name: "no-secrets", Match: nodegroup.Match{Metadata: map[string]string{"team": "web"}}},
		{Name: "default", Default: true},
	}
	f := NewGroupedFleet(rules, []*snapshot.Snapshot{secret, secret, secret, {}, secret})
	got := warnings(f.Exposures(Binding{}))
	for _, want := range []string{
		`payments: group "payments" holds 1 Secrets and declares no identities; it is picked by match.metadata.team, match.zone`,
		`by-id: group "by-id" holds 1 Secrets and declares no identities; it is picked by match.id, match.cluster`,
		`default: group "default" holds 1 Secrets and declares no identities; it is picked by being the default group`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("exposures lack %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"locked:", "no-secrets:"} {
		if strings.Contains(got, not) {
			t.Errorf("exposures name %s (identities declared, or no Secrets):\n%s", not, got)
		}
	}
	// Under a rule binding id and cluster, a group picked by them alone
	// is proven.
	if got := warnings(f.Exposures(Binding{ID: true, Cluster: true})); strings.Contains(got, "by-id:") || !strings.Contains(got, "payments:") {
		t.Errorf("with id and cluster bound:\n%s", got)
	}
	// One group: there is no other group to join.
	if got := f1(t, secret, nil).Exposures(Binding{}); len(got) != 0 {
		t.Errorf("a single group: %s", warnings(got))
	}
}

// Finding 3 of issue 30: a rollout whose group declares no identities,
// served under no identity rule, can be halted by any client claiming a
// node of its stage: said at publish.
func TestRolloutWithoutIdentitiesIsNamed(t *testing.T) {
	p := &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1}}}
	got := warnings(f1(t, &snapshot.Snapshot{}, p).Exposures(Binding{}))
	if !strings.Contains(got, `group "edge" has a rollout and declares no identities`) {
		t.Errorf("no rollout warning:\n%s", got)
	}
	if got := f1(t, &snapshot.Snapshot{}, p).Exposures(Binding{ID: true}); len(got) != 0 {
		t.Errorf("under an identity rule: %s", warnings(got))
	}
	// A rule binding the cluster alone lets a certificate claim any id.
	if got := warnings(f1(t, &snapshot.Snapshot{}, p).Exposures(Binding{Cluster: true})); !strings.Contains(got, "has a rollout") {
		t.Errorf("under a rule binding only the cluster, no rollout warning:\n%s", got)
	}
}

func f1(t *testing.T, s *snapshot.Snapshot, p *nodegroup.Rollout) *Fleet {
	t.Helper()
	return NewGroupedFleet(nodegroup.Groups{{Name: "edge", Default: true, Rollout: p}}, []*snapshot.Snapshot{s})
}
