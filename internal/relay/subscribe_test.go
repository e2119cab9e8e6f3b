package relay

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A key subscribes by name to the routes its listeners name, and drops
// a route no listener names any more.
func TestKeySubscribesToWhatItsResourcesName(t *testing.T) {
	up := xdstest.Start(t, xds.Options{})
	up.Publish(t, xdstest.APIListener("l", "r1"), xdstest.Route("r1", "c"), xdstest.Route("r2", "c"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
	pool := upstream.NewPool(nil, 0, 0)
	defer pool.Close()
	tmpl, _ := ParseTemplate("{cluster}")
	r := New(Options{Upstreams: []string{up.Addr}, Pool: pool, Template: tmpl, ID: "relay", Registry: xdstype.New(), Publisher: fleet.NewPublisher()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	release, _, err := r.Admit(context.Background(), nodegroup.Node{ID: "p", Cluster: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	routes := func() []string {
		r.mu.Lock()
		ks := r.keys["k"]
		r.mu.Unlock()
		return slices.Sorted(func(yield func(string) bool) {
			for n := range ks.client.State()[xdstype.RouteURL] {
				if !yield(n) {
					return
				}
			}
		})
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(routes(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the key holds routes %v, want %v", routes(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("r1")
	up.Publish(t, xdstest.APIListener("l", "r2"), xdstest.Route("r1", "c"), xdstest.Route("r2", "c"), xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
	waitFor("r2")
}
