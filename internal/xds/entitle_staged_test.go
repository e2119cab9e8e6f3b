package xds

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
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

// stagedSecretFleet is a group in a staged rollout at stage 1 (a 1% share)
// whose previous snapshot holds the Secret "key", restricted to
// a.example by the policy published with it; the new config is cur, with
// the policy curPolicy.
func stagedSecretFleet(t *testing.T, reg *xdstype.Registry, cur *snapshot.Snapshot, curPolicy map[string][]string) *fleet.Fleet {
	t.Helper()
	rules := nodegroup.Groups{{Name: "edge", Default: true, Rollout: &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.01}, {Share: 1}}}}}
	prev := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{secretSnap(t, reg, "key", "other")})
	prev.RestrictSecrets(map[string][]string{"key": {"a.example"}})
	next := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{cur})
	next.RestrictSecrets(curPolicy)
	g, _ := prev.Lookup("edge")
	return next.Staged("edge", g.Snapshot, 1)
}

func secretSnap(t *testing.T, reg *xdstype.Registry, names ...string) *snapshot.Snapshot {
	t.Helper()
	var inputs []xdstype.Resource
	for _, n := range names {
		inputs = append(inputs, xdstype.Resource{Type: reg.Lookup(xdstype.SecretURL), Name: n, Message: &tlsv3.Secret{Name: n,
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: n}}}}}})
	}
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// outsideStage returns a node id not in a 1% first stage.
func outsideStage(t *testing.T) string {
	for i := range 100 {
		id := fmt.Sprintf("edge-%d", i)
		if nodegroup.NodeShare(id) >= 0.01 {
			return id
		}
	}
	t.Fatal("no node id outside a 1% stage")
	return ""
}

// Finding 1 of issue 30: a change that deletes (or renames) a restricted
// Secret starts a rollout; the nodes outside the stage keep the previous
// snapshot, which still holds the Secret. They must be entitled by the
// policy published with that snapshot, not by the new config's, in which
// the deleted Secret has no policy and so would be open to every verified
// node.
func TestDeletedRestrictedSecretStaysRestrictedOutsideTheStage(t *testing.T) {
	reg := xdstype.New()
	srv := New(Options{Registry: reg, Fleets: fleet.NewPublisher()})
	ca := identitytest.NewCA(t, "pylon test CA")
	streamOf := func(dns string) *stream {
		leaf := ca.Issue(t, "", dns)
		return &stream{srv: srv, ident: identity.FromState(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf.Cert}}})}
	}
	node := &corev3.Node{Id: outsideStage(t)}
	for _, tc := range []struct {
		name   string
		cur    *snapshot.Snapshot
		policy map[string][]string
	}{
		{"deleted", secretSnap(t, reg, "other"), nil},
		{"renamed", secretSnap(t, reg, "key2", "other"), map[string][]string{"key2": {"a.example"}}},
		// The policy alone narrowed: what the operator took away is
		// taken away at once, stage or not.
		{"narrowed", secretSnap(t, reg, "key", "other"), map[string][]string{"key": {"a.example"}, "other": {"a.example"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := stagedSecretFleet(t, reg, tc.cur, tc.policy)
			g := f.Group(node, []string{"b.example"})
			if g.Snapshot.Set(xdstype.SecretURL).Get("key") == nil {
				t.Fatal("the node outside the stage does not get the previous snapshot")
			}
			e := streamOf("b.example").entitlement(f, g)
			want := []string{"key"}
			if tc.name == "narrowed" {
				want = []string{"key", "other"}
			}
			if e == nil || e.w == nil || !slices.Equal(e.w.names, want) {
				var got []string
				if e != nil && e.w != nil {
					got = e.w.names
				}
				t.Fatalf("b.example outside the stage is denied %v, want %v: the previous snapshot's restricted Secret is served to a node its policy never allowed", got, want)
			}
			if allowed := streamOf("a.example").entitlement(f, g); tc.name != "narrowed" && allowed != nil && allowed.w != nil {
				t.Fatalf("a.example, allowed by the previous policy, is denied %v", allowed.w.names)
			}
		})
	}
}
