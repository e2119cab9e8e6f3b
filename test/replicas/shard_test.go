package replicas_test

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// shardGroups splits the fleet in two node groups by node id.
const shardGroups = `groups:
- name: edge-eu
  match: { id: "edge-*" }
- name: mesh
  match: { id: "mesh-*" }
`

// Issue 33 item 3: two replicas on one etcd, each serving some groups
// (--groups). A node of each group is served by its shard and refused by
// the other with FAILED_PRECONDITION naming the shard that serves it (not
// its address: the client has no verified certificate); /proxies and
// pylon status on either list both, with each replica's shard.
func TestShardsServeTheirGroups(t *testing.T) {
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	a := f.start("replica-a", "--groups", "edge-*")
	b := f.start("replica-b", "--groups", "mesh")
	res := a.apply(shardGroups)
	if res.Error != "" {
		t.Fatalf("apply: %s", res.Error)
	}
	// The shards' fleets differ (each builds its own groups): wait for
	// each to serve the written revision's groups through its proxy.
	edge := startEnvoy(t, a.xdsAddr, "edge-1", true)
	mesh := startEnvoy(t, b.xdsAddr, "mesh-1", false)
	edge.ready("backend", "greeter")
	mesh.ready("backend", "greeter")
	nodes := []string{"edge-1", "mesh-1"}
	want := syncedText("edge-1", a.id) + "\n" + syncedText("mesh-1", b.id)
	for _, r := range []*replica{a, b} {
		waitRows(r, "", want, nodes...)
	}

	for _, c := range []struct {
		on         *replica
		node, want string
	}{
		{b, "edge-2", `node "edge-2" is in group "edge-eu", which this replica does not serve (it serves --groups mesh); replica replica-a serves it (--groups edge-*)`},
		{a, "mesh-2", `node "mesh-2" is in group "mesh", which this replica does not serve (it serves --groups edge-*); replica replica-b serves it (--groups mesh)`},
	} {
		s := xdstest.OpenADS(t, xdstest.Dial(t, c.on.xdsAddr), xdstest.Node(c.node))
		_ = s.TrySend(&discoveryv3.DiscoveryRequest{Node: xdstest.Node(c.node), TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"})
		err := s.Err()
		if grpcstatus.Code(err) != codes.FailedPrecondition || grpcstatus.Convert(err).Message() != c.want {
			t.Errorf("%s on %s ended with %v\nwant FAILED_PRECONDITION: %s", c.node, c.on.id, err, c.want)
		}
		if strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the refusal of a client without a verified certificate names an address: %v", err)
		}
	}

	for _, r := range []*replica{a, b} {
		var body struct {
			Streams []struct {
				Node, Replica, Shard string
			} `json:"streams"`
		}
		r.getJSON("/proxies", &body)
		shards := map[string]string{}
		for _, s := range body.Streams {
			shards[s.Node] = s.Replica + " " + s.Shard
		}
		if shards["edge-1"] != "replica-a edge-*" || shards["mesh-1"] != "replica-b mesh" {
			t.Errorf("/proxies on %s names the replicas and shards %v, want edge-1 on replica-a (edge-*), mesh-1 on replica-b (mesh)", r.id, shards)
		}
		out, code := r.cli("status")
		if code != 0 || !strings.Contains(out, "replica-a [edge-*]") || !strings.Contains(out, "replica-b [mesh]") {
			t.Errorf("pylon status on %s (exit %d) does not show both shards:\n%s", r.id, code, out)
		}
	}
}
