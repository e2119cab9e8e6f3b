package snapshot_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A snapshot keeps the secret policy it was published with through what a
// staged rollout does to it (the current endpoints, Secrets withheld), and
// the policy is cut to its own Secrets.
func TestSecretPolicyTravelsWithTheSnapshot(t *testing.T) {
	reg := xdstype.New()
	secret := &tlsv3.Secret{Name: "k", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "ca"}}}}}
	plain, err := snapshot.Build(reg, []xdstype.Resource{
		{Type: reg.Lookup(xdstype.SecretURL), Name: "k", Message: secret},
		{Type: reg.Lookup(xdstype.EndpointURL), Name: "web", Message: assignment("web", 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := plain.WithSecretPolicy(map[string][]string{"k": {"a.example"}, "gone": {"b.example"}})
	if got := s.SecretPolicy(); len(got) != 1 || got["k"][0] != "a.example" {
		t.Fatalf("policy %v, want only k's", got)
	}
	for name, got := range map[string]*snapshot.Snapshot{
		"WithEndpointsOf": s.WithEndpointsOf(buildMixed(t, reg, assignment("web", 2))),
		"Without":         snapshot.Without(s, xdstype.ClusterURL, nil),
	} {
		if got == s || got.SecretPolicy()["k"] == nil {
			t.Errorf("%s: a new snapshot %v with the policy %v, want a new one that kept k's", name, got != s, got.SecretPolicy())
		}
	}
	if plain.WithSecretPolicy(nil) != plain {
		t.Error("no policy to keep made a copy")
	}
}
