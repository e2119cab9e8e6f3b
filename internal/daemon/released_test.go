package daemon

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A staged rollout's change is released to more nodes when a stage starts,
// when a halted rollout resumes, and when it completes; not when it starts
// (its acceptance times that), halts, or is replaced by a new change, and
// never for a group without a policy. Only the types the change touched
// are released.
func TestReleasesFollowTheStages(t *testing.T) {
	reg := xdstype.New()
	v1 := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Endpoints("a", 80))
	v2 := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Endpoints("a", 80), xdstest.Endpoints("b", 80))
	v3 := xdstest.Snapshot(t, reg, xdstest.Cluster("c"), xdstest.Endpoints("c", 80))
	rules := nodegroup.Groups{
		{Name: "plain", Match: nodegroup.Match{ID: "p-*"}},
		{Name: "edge", Default: true, Rollout: &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1}, {Share: 0.5}}}},
	}
	grouped := func(next *snapshot.Snapshot) *fleet.Fleet {
		return fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{v3, next})
	}
	type call struct {
		Step     string
		Versions map[string][]string
	}
	var got []call
	step := ""
	r := &releases{release: func(v map[string][]string, _ time.Time) { got = append(got, call{step, v}) }}
	for _, s := range []struct {
		name string
		f    *fleet.Fleet
	}{
		{"v1 served", grouped(v1)},
		{"v2 at stage 1", grouped(v2).Staged("edge", v1, 1)},
		{"stage 2", grouped(v2).Staged("edge", v1, 2)},
		{"halted", grouped(v2).Staged("edge", v1, 0)},
		{"resumed", grouped(v2).Staged("edge", v1, 2)},
		{"complete", grouped(v2)},
		{"v3 at stage 1", grouped(v3).Staged("edge", v2, 1)},
		{"v3 replaced by v1 at stage 1", grouped(v1).Staged("edge", v2, 1)},
	} {
		step = s.name
		r.observe(s.f, time.Now())
	}
	// The endpoints changed too: the nodes outside the stage get the
	// new ones with the previous config, so only the staged fleet's
	// previous snapshot says what was held back. Here it is v1 itself.
	cds := map[string][]string{xdstype.ClusterURL: {v2.Set(xdstype.ClusterURL).Version()}, xdstype.EndpointURL: {v2.Set(xdstype.EndpointURL).Version()}}
	want := []call{{"stage 2", cds}, {"resumed", cds}, {"complete", cds}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("releases (-want +got):\n%s", d)
	}
}
