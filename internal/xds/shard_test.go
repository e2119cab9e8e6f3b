package xds_test

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// peersOf is a shard's view of the others: mesh-* groups are replica-b's.
func peersOf(group string) []xds.ShardPeer {
	if (fleet.Selector{"mesh-*"}).Serves(group) {
		return []xds.ShardPeer{{Replica: "replica-b", Groups: "mesh-*", XDS: "127.0.0.1:9"}}
	}
	return nil
}

// publishShard publishes rules' fleet with the groups not in served
// marked Unserved, as compile makes them.
func publishShard(t *testing.T, srv *xdstest.Server, rules nodegroup.Groups, served fleet.Selector, worlds ...[]any) {
	t.Helper()
	snaps := make([]*snapshot.Snapshot, len(worlds))
	for i, w := range worlds {
		snaps[i] = xdstest.Snapshot(t, srv.Registry, w...)
	}
	f := fleet.NewGroupedFleet(rules, snaps)
	f.ServeOnly(served)
	srv.Publisher.Publish(f)
}

// refusedFor opens a stream for id and returns how it ended.
func refusedFor(t *testing.T, srv *xdstest.Server, id string) error {
	t.Helper()
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node(id))
	_ = s.TrySend(&discoveryv3.DiscoveryRequest{Node: xdstest.Node(id), TypeUrl: cds})
	return s.Err()
}

// A replica refuses the node of a group it does not serve with
// FAILED_PRECONDITION naming the replica that serves it, or saying none
// is known; its address only to a verified client. A config change that
// moves an open stream's node to such a group ends the stream so.
func TestShardRefusesNodesOfAnotherShardNamingIt(t *testing.T) {
	rec := newRecorder()
	srv := xdstest.Start(t, xds.Options{Observer: rec, Shard: &xds.Shard{Groups: fleet.Selector{"edge"}, ServedBy: peersOf}})
	rules := nodegroup.Groups{
		{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}},
		{Name: "mesh-eu", Match: nodegroup.Match{ID: "mesh-*"}},
		{Name: "batch", Match: nodegroup.Match{ID: "batch-*"}},
	}
	worlds := [][]any{{xdstest.Cluster("web"), xdstest.Endpoints("web", 1)}, {xdstest.Cluster("payments"), xdstest.Endpoints("payments", 2)}, {xdstest.Cluster("jobs"), xdstest.Endpoints("jobs", 3)}}
	publishShard(t, srv, rules, fleet.Selector{"edge"}, worlds...)

	edge := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("edge-1"))
	edge.Request(cds)
	wantNames(t, edge.RecvType(cds), "web")

	err := refusedFor(t, srv, "mesh-1")
	msg := grpcstatus.Convert(err).Message()
	if grpcstatus.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a node of another shard's group ended with %v, want FAILED_PRECONDITION", err)
	}
	for _, want := range []string{`node "mesh-1" is in group "mesh-eu"`, "does not serve", "--groups edge", "replica replica-b serves it (--groups mesh-*)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "127.0.0.1:9") {
		t.Errorf("the refusal of a client without a verified certificate names the shard's address: %q", msg)
	}
	ev := rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamRefused && e.Reason == xds.RefusedOtherShard })
	if ev.NodeID() != "mesh-1" {
		t.Errorf("the refusal was reported for node %q, want mesh-1", ev.NodeID())
	}
	if err := refusedFor(t, srv, "batch-1"); grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no live replica is known to serve it") {
		t.Errorf("a node of a group no shard serves ended with %v, want FAILED_PRECONDITION saying none is known", err)
	}

	// This replica no longer serves edge: its open stream ends.
	publishShard(t, srv, rules, fleet.Selector{"batch"}, worlds...)
	if err := edge.Err(); grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `group "edge"`) {
		t.Fatalf("the stream of a node whose group left this shard ended with %v, want FAILED_PRECONDITION naming its group", err)
	}
}

// A client whose certificate proves its node is told where the shard
// serving it listens.
func TestShardNamesItsAddressToVerifiedClients(t *testing.T) {
	m := startMTLS(t, xds.Options{Shard: &xds.Shard{Groups: fleet.Selector{"default"}, ServedBy: func(string) []xds.ShardPeer {
		return []xds.ShardPeer{{Replica: "replica-b", Groups: "secure", XDS: "127.0.0.1:9"}}
	}}})
	rules := nodegroup.Groups{
		{Name: "secure", Match: nodegroup.Match{ID: "edge-*"}, Identities: []string{edgeSA + "*"}},
		{Name: "default", Default: true},
	}
	publishShard(t, m.srv, rules, fleet.Selector{"default"}, []any{xdstest.Cluster("secure-web"), xdstest.Endpoints("secure-web", 1)}, []any{xdstest.Cluster("public-web"), xdstest.Endpoints("public-web", 2)})
	s := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-1"), edgeNode("edge-1"))
	_ = s.TrySend(&discoveryv3.DiscoveryRequest{Node: edgeNode("edge-1"), TypeUrl: cds})
	err := s.Err()
	if grpcstatus.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "replica replica-b serves it (--groups secure) at 127.0.0.1:9") {
		t.Fatalf("a verified node of another shard's group ended with %v, want FAILED_PRECONDITION naming the shard and its address", err)
	}
}
