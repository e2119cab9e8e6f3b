package fleet_test

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// BenchmarkFleetGroupOf measures what every stream does on every publish:
// resolving its node's group on the new fleet, here the last of three
// rules, in a staged rollout, for a node with metadata and an identity.
func BenchmarkFleetGroupOf(b *testing.B) {
	reg := xdstype.New()
	s, prev := build(b, reg, cluster("a", time.Second)), build(b, reg, cluster("a", 2*time.Second))
	rules := nodegroup.Groups{
		{Name: "ingress", Match: nodegroup.Match{ID: "ingress-*", Metadata: map[string]string{"tier": "front"}}},
		{Name: "payments", Identities: []string{"spiffe://td/ns/payments/*"}, Match: nodegroup.Match{Cluster: "payments"}},
		{Name: "edge", Match: nodegroup.Match{ID: "edge-*", Region: "r1"}, Rollout: &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1}, {Share: 0.5}}}},
	}
	f := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{s, s, s}).Staged("edge", prev, 1)
	n := nodegroup.Node{ID: "edge-17", Cluster: "edge", Region: "r1", Metadata: map[string]string{"tier": "edge"}, Identities: []string{"spiffe://td/ns/edge/sa/envoy"}}
	if f.GroupOf(n) == nil {
		b.Fatal("no group")
	}
	b.ReportAllocs()
	for b.Loop() {
		f.GroupOf(n)
	}
}
