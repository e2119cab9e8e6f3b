package relay

import (
	"context"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestKeyServesNoResourceItLetGoOf: a route a proxy asked for, which
// nothing of the key names, leaves the key's served config once no proxy
// asks for it: the key no longer follows it upstream, so serving it on
// would serve a copy that no longer changes with the upstream's.
func TestKeyServesNoResourceItLetGoOf(t *testing.T) {
	up := xdstest.Start(t, xds.Options{})
	up.Publish(t, xdstest.APIListener("l", "r1"), xdstest.Route("r1", "c"), xdstest.Route("r2", "c"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
	pool := upstream.NewPool(nil, 0, 0)
	defer pool.Close()
	tmpl, _ := ParseTemplate("{cluster}")
	reg, pub := xdstype.New(), fleet.NewPublisher()
	r := New(Options{Upstreams: []string{up.Addr}, Pool: pool, Template: tmpl, ID: "relay", Registry: reg, Publisher: pub})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	front := xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Admit: r.Admit})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, front.Addr), xdstest.Node("p"))
	s.Subscribe(xdstype.RouteURL, "r2")
	first := s.RecvType(xdstype.RouteURL)
	if len(first.GetResources()) != 1 || first.GetResources()[0].GetName() != "r2" {
		t.Fatalf("the proxy asking for r2 got %v, want r2 through the relay", first.GetResources())
	}
	s.ACK(first)
	served := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		ks := r.keys["test-cluster"]
		return ks.snap.Set(xdstype.RouteURL).Get("r2") != nil
	}
	if !served() {
		t.Fatal("the key does not serve r2, which its proxy asked for and got")
	}

	s.Unsubscribe(xdstype.RouteURL, "r2")
	deadline := time.Now().Add(10 * time.Second)
	for served() {
		if time.Now().After(deadline) {
			t.Fatal("no proxy asks for r2 any more and the key no longer holds it upstream, but its config still serves r2")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
