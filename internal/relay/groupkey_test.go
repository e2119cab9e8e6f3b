package relay_test

import (
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// twoGroups is an upstream's two node groups, one matched by node id, one
// by cluster; the greeter's config goes to both.
const twoGroups = `groups:
- name: edge
  match: { id: "edge-*" }
- name: mesh
  match: { cluster: mesh }
`

// TestProxiesAreKeyedByTheUpstreamsGroups: with a Pylon upstream's admin
// API, the relay keys each proxy by the group the upstream would put it
// in, whatever its cluster: one upstream stream per group, each in its
// group upstream (a group matching on node ids is entered with the id of
// the key's first proxy). A node of no group is refused, naming why.
func TestProxiesAreKeyedByTheUpstreamsGroups(t *testing.T) {
	up := startUpstream(t, "", twoGroups+greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
	})
	for _, p := range []struct{ id, cluster string }{{"edge-1", "site-a"}, {"edge-2", "site-b"}, {"mesh-1", "mesh"}} {
		if _, port := subscribeEndpointsOf(t, rd.xds, p.id, p.cluster); port != 9001 {
			t.Fatalf("%s got endpoints on port %d, want 9001", p.id, port)
		}
	}
	var keys []string
	for _, k := range rd.r.Keys() {
		keys = append(keys, k.Key)
		if want := map[string]int{"edge": 2, "mesh": 1}[k.Key]; k.Proxies != want || k.Streams != 1 {
			t.Errorf("key %s: %d proxies on %d upstream streams, want %d on one", k.Key, k.Proxies, k.Streams, want)
		}
	}
	if !slices.Equal(keys, []string{"edge", "mesh"}) {
		t.Fatalf("keys %v, want the upstream's groups edge and mesh", keys)
	}
	groups := map[string]string{}
	for _, s := range open(proxies(t, up.d.Admin, up.read)) {
		groups[s.Node] = s.Group
	}
	if len(groups) != 2 || groups["edge-1"] != "edge" || groups["relay-test/mesh"] != "mesh" {
		t.Errorf("upstream streams by node and group %v, want edge-1 in edge and relay-test/mesh in mesh", groups)
	}

	s := subscribeOnly(t, rd.xds, "other-1", "site-a")
	if _, err := s.NextWithin(bound); grpcstatus.Code(err) != codes.FailedPrecondition {
		t.Errorf("a node of no upstream group: %v, want FAILED_PRECONDITION", err)
	}
}

// TestGroupKeyedRelayRestartedDuringAnOutageServes: keyed by a Pylon
// upstream's groups, a relay restarted while the upstream (xDS and admin
// API) is away keys a new proxy by the rules it kept and serves it the
// group's config kept in its data folder.
func TestGroupKeyedRelayRestartedDuringAnOutageServes(t *testing.T) {
	up := startUpstream(t, "", twoGroups+greeter(9001))
	ro := daemon.RelayOptions{UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token")}
	rd := startRelay(t, []string{up.d.XDS}, "", ro)
	if _, p := subscribeEndpointsOf(t, rd.xds, "edge-1", "site-a"); p != 9001 {
		t.Fatalf("edge-1 got endpoints on port %d, want 9001", p)
	}
	rd.stop()
	up.d.Stop(t)

	again := startRelay(t, []string{up.d.XDS}, rd.dataDir, ro)
	if _, p := subscribeEndpointsOf(t, again.xds, "edge-3", "site-c"); p != 9001 {
		t.Fatalf("edge-3, on the relay restarted during the outage, got endpoints on port %d, want 9001", p)
	}
	if k := again.r.Keys(); len(k) != 1 || k[0].Key != "edge" || k[0].Connected {
		t.Errorf("keys %+v, want edge alone, not connected", k)
	}
}
