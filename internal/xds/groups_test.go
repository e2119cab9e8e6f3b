package xds_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// publishGroups publishes a fleet of groups: worlds[i] is rules[i]'s.
func publishGroups(t *testing.T, srv *xdstest.Server, rules nodegroup.Groups, worlds ...[]any) {
	t.Helper()
	snaps := make([]*snapshot.Snapshot, len(worlds))
	for i, w := range worlds {
		snaps[i] = xdstest.Snapshot(t, srv.Registry, w...)
	}
	srv.Publisher.Publish(fleet.NewGroupedFleet(rules, snaps))
}

func TestGroups(t *testing.T) {
	rules := nodegroup.Groups{
		{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}},
		{Name: "mesh", Match: nodegroup.Match{Metadata: map[string]string{"mesh": "on"}}, SuppressDeltaNotFound: true},
	}
	edge := []any{xdstest.Cluster("web"), xdstest.Endpoints("web", 1)}
	mesh := []any{xdstest.Cluster("payments"), xdstest.Endpoints("payments", 2)}

	t.Run("nodes_in_different_groups_get_different_snapshots", func(t *testing.T) {
		e := setup(t)
		publishGroups(t, e.srv, rules, edge, mesh)
		a := e.ads(t, "edge-1")
		a.Request(cds)
		wantNames(t, a.RecvType(cds), "web")
		meshNode := xdstest.Node("app-1")
		meshNode.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"mesh": structpb.NewStringValue("on")}}
		b := xdstest.OpenADS(t, e.conn, meshNode)
		b.Request(cds)
		wantNames(t, b.RecvType(cds), "payments")
		ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.ResponseSent && ev.NodeID() == "app-1" })
		if ev.Group != "mesh" {
			t.Fatalf("event group %q, want mesh", ev.Group)
		}
	})

	t.Run("node_in_no_group_gets_nothing_and_it_is_said", func(t *testing.T) {
		e := setup(t)
		publishGroups(t, e.srv, rules, edge, mesh)
		s := e.ads(t, "stray")
		s.Request(cds)
		e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.NoMatchingGroup && ev.NodeID() == "stray" })
		// A later config with a default group takes it in.
		publishGroups(t, e.srv, append(rules[:2:2], nodegroup.Group{Name: "rest", Default: true}), edge, mesh, base())
		wantNames(t, s.RecvType(cds), "a", "b")
	})

	t.Run("config_change_moves_a_node", func(t *testing.T) {
		e := setup(t)
		publishGroups(t, e.srv, rules, edge, mesh)
		s := e.ads(t, "edge-9")
		s.Request(cds)
		wantNames(t, s.RecvType(cds), "web")
		s.Request(cds)
		s.ExpectSilence()
		// The edge rule now takes "edge-1" only: edge-9 falls to the new
		// default group, and its stream moves it over.
		moved := nodegroup.Groups{{Name: "edge", Match: nodegroup.Match{ID: "edge-1"}}, {Name: "rest", Default: true}}
		publishGroups(t, e.srv, moved, edge, mesh)
		wantNames(t, s.RecvType(cds), "payments")
	})

	t.Run("X33_per_group_not_found_switch", func(t *testing.T) {
		e := setup(t)
		publishGroups(t, e.srv, rules, edge, mesh)
		meshNode := xdstest.Node("app-2")
		meshNode.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"mesh": structpb.NewStringValue("on")}}
		m := xdstest.OpenDeltaADS(t, e.conn, meshNode)
		m.Subscribe(eds, "payments", "ghost")
		wantDelta(t, m.RecvType(eds), []string{"payments"}, nil)
		d := e.delta(t, "edge-2")
		d.Subscribe(eds, "web", "ghost")
		wantDelta(t, d.RecvType(eds), []string{"web"}, []string{"ghost"})
	})
}
