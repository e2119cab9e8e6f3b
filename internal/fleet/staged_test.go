package fleet_test

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A staged fleet gives the nodes its stage takes the group's new snapshot
// and the others the previous one: both the same shared objects for every
// node, a version per stage, and nothing changes for the other groups.
func TestStagedFleet(t *testing.T) {
	reg := xdstype.New()
	prev, next := build(t, reg, cluster("a", time.Second)), build(t, reg, cluster("a", 2*time.Second))
	other := build(t, reg, cluster("b", time.Second))
	policy := &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1}, {Share: 0.5}}}
	rules := nodegroup.Groups{{Name: "other", Match: nodegroup.Match{ID: "o-*"}}, {Name: "edge", Default: true, Rollout: policy}}
	f := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{other, next})

	versions := map[string]bool{f.Version(): true}
	for stage := 0; stage <= 2; stage++ {
		s := f.Staged("edge", prev, stage)
		if versions[s.Version()] {
			t.Fatalf("stage %d: version %s not new", stage, s.Version())
		}
		versions[s.Version()] = true
		if p, st := s.Previous("edge"); p != prev || st != stage {
			t.Fatalf("Previous = %v, %d", p, st)
		}
		newCount := 0
		for i := range 1000 {
			id := fmt.Sprintf("edge-%d", i)
			g := s.Group(&corev3.Node{Id: id}, nil)
			want := next
			if !policy.Takes(stage, nodegroup.Node{ID: id}) {
				want = prev
			} else {
				newCount++
			}
			if g.Name != "edge" || g.Snapshot != want {
				t.Fatalf("stage %d node %s: got group %s snapshot %s", stage, id, g.Name, g.Snapshot.Version())
			}
			if again := s.Group(&corev3.Node{Id: id}, nil); again != g {
				t.Fatalf("node %s resolves to a different *Group on the same fleet", id)
			}
		}
		if o := s.Group(&corev3.Node{Id: "o-1"}, nil); o.Snapshot != other {
			t.Fatal("another group's node got a staged snapshot")
		}
		if stage == 0 && newCount != 0 || stage == 2 && (newCount < 430 || newCount > 570) {
			t.Errorf("stage %d: %d of 1000 nodes on the new snapshot", stage, newCount)
		}
	}
	if f.Staged("other", prev, 1) != f || f.Staged("nope", prev, 1) != f {
		t.Error("a group without a policy, or unknown, was staged")
	}
}
