package relay_test

import (
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestAGroupRuleFlapWhileTheUpstreamIsAwayKeepsTheGroupsConfig: the
// upstream's group rules move a proxy's node to another group and back
// while its xDS upstream is away. The first move marks the group's key
// stale (its stream announces a node of the other group now); the move
// back makes that true again, so the key is its group's once more and
// keeps its config: a new proxy of the group is served it. Made anew
// instead, the key had nothing until the upstream came back.
func TestAGroupRuleFlapWhileTheUpstreamIsAwayKeepsTheGroupsConfig(t *testing.T) {
	x := startUpstream(t, "", movingGroups("site-a", "mesh"))
	rules := startUpstream(t, "", movingGroups("site-a", "mesh"))
	rd := startRelay(t, []string{x.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + rules.d.Admin, UpstreamReadTokenFile: filepath.Join(rules.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond,
	})
	conn := xdstest.Dial(t, rd.xds)
	s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "mover-1", Cluster: "site-a"})
	s.Subscribe(xdstype.ClusterURL, "*")
	s.ACK(s.RecvType(xdstype.ClusterURL))
	x.d.Stop(t)
	proxiesOf := func(key string) int {
		for _, k := range rd.r.Keys() {
			if k.Key == key {
				return k.Proxies
			}
		}
		return -1
	}
	writeAtomically(t, rules.cfg, movingGroups("elsewhere", "site-a"))
	if !eventually(func() bool { return proxiesOf("mesh") == 1 }) {
		t.Fatal("the proxy did not move to mesh's key")
	}
	writeAtomically(t, rules.cfg, movingGroups("site-a", "mesh"))
	if !eventually(func() bool { return proxiesOf("edge") == 1 }) {
		t.Fatal("the proxy did not move back to edge's key")
	}
	s2 := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "stay-1", Cluster: "site-a"})
	s2.Subscribe(xdstype.ClusterURL, "*")
	if _, err := s2.NextWithin(4 * time.Second); err != nil {
		t.Fatalf("a new proxy of edge after the flap, its upstream away: %v; want edge's config, kept", err)
	}
}
