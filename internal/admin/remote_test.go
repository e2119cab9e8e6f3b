package admin

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/status"
)

// A proxy served by another replica is marked remote, and claims no
// comparison with the config: what it was sent stays on the replica
// serving it, so this one cannot say it is in sync (the page said "in
// sync" beside "not sent yet").
func TestProxyOfAnotherReplicaIsRemoteWithoutDrift(t *testing.T) {
	fleet := otherReplicas{remote: []fleetstatus.Remote{
		{Replica: "pylon-b", Proxy: fleetstatus.Proxy{Node: "far", Group: "g", Kind: "ADS", Types: []fleetstatus.Type{
			{Type: "CDS", State: status.Synced, Sent: "v1", ACKed: "v1"}, {Type: "LDS", State: status.Stale, Sent: "v2", ACKed: "v1"}}}},
	}}
	h := newHarness(t, Options{Token: writeTok, Identifier: "pylon-a", Fleet: fleet}, nil)
	h.src.streams = []status.Stream{{ID: 1, Node: "near", Group: "g", Kind: "ADS"}}

	var far struct {
		Streams []proxyDump `json:"streams"`
	}
	_, body := h.do(t, "GET", "/proxies/far", writeTok, nil)
	decode(t, body, &far)
	if len(far.Streams) != 1 {
		t.Fatalf("/proxies/far: %s", body)
	}
	s := far.Streams[0]
	if !s.Remote || s.Replica != "pylon-b" {
		t.Errorf("another replica's proxy: remote %v, replica %q; want true, pylon-b", s.Remote, s.Replica)
	}
	if len(s.Drift) != 0 {
		t.Errorf("another replica's proxy compared with this replica's config: %+v", s.Drift)
	}
	var near struct {
		Streams []proxyDump `json:"streams"`
	}
	_, body = h.do(t, "GET", "/proxies/near", writeTok, nil)
	decode(t, body, &near)
	if len(near.Streams) != 1 || near.Streams[0].Remote {
		t.Errorf("this replica's own proxy: %s", body)
	}
}
