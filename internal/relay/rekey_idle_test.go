package relay_test

import (
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestAKeyProxiesMovedOutOfLivesUntilTheRulesApply: a proxy moved by a
// rules change to a key that has no config yet is still its old group's
// in the fleet until the change applies, so its old key is not dropped
// as idle meanwhile (IdleKey 400ms): dropped, the proxy
// was in no group, cut off from its old group's updates.
func TestAKeyProxiesMovedOutOfLivesUntilTheRulesApply(t *testing.T) {
	sel, err := fleet.ParseSelector("edge")
	if err != nil {
		t.Fatal(err)
	}
	up := startUpstreamWith(t, "", moverGroups(false), func(o *daemon.Options) { o.Replicas.Groups = sel })
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond, IdleKey: 400 * time.Millisecond,
	})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: "mover-1", Cluster: "site-a"})
	s.Subscribe(xdstype.ClusterURL, "*")
	s.ACK(s.RecvType(xdstype.ClusterURL))
	writeAtomically(t, up.cfg, moverGroups(true))
	keys := func() map[string]int {
		out := map[string]int{}
		for _, k := range rd.r.Keys() {
			out[k.Key] = k.Proxies
		}
		return out
	}
	if !eventually(func() bool { return keys()["mesh"] == 1 }) {
		t.Fatalf("keys %v: the proxy did not move to mesh's key", keys())
	}
	// Past IdleKey several times over (a check that something does not
	// happen: no event to wait for), edge's key must still be there.
	time.Sleep(2 * time.Second)
	if _, ok := keys()["edge"]; !ok {
		t.Fatalf("keys %v: edge's key, whose group the moved proxy is still in until the rules apply, was dropped", keys())
	}
}
