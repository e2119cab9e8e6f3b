package relay

import (
	"context"
	"slices"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A proxy asking for a route nothing of its key names gets it through the
// relay (the key subscribes upstream to it), is told a name that does not
// exist upstream does not exist, as serve tells it, and once no proxy asks
// for the route the key's upstream subscription drops it.
func TestKeySubscribesToWhatItsProxiesAskFor(t *testing.T) {
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
	got := s.RecvType(xdstype.RouteURL)
	if names := deltaNames(got); !slices.Equal(names, []string{"r2"}) || len(got.RemovedResources) > 0 {
		t.Fatalf("asked for r2, which no listener names: got %v, removed %v; want r2", names, got.RemovedResources)
	}
	s.ACK(got)

	s.Subscribe(xdstype.RouteURL, "nope")
	got = s.RecvType(xdstype.RouteURL)
	if len(got.Resources) > 0 || !slices.Equal(got.RemovedResources, []string{"nope"}) {
		t.Fatalf("asked for nope, which does not exist upstream: got %v, removed %v; want it said not to exist", deltaNames(got), got.RemovedResources)
	}
	s.ACK(got)

	s.Unsubscribe(xdstype.RouteURL, "r2", "nope")
	held := func() []string {
		r.mu.Lock()
		ks := r.keys["test-cluster"]
		r.mu.Unlock()
		return slices.Sorted(func(yield func(string) bool) {
			for n := range ks.client.State()[xdstype.RouteURL] {
				if !yield(n) {
					return
				}
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(held(), []string{"r1"}) {
		if time.Now().After(deadline) {
			t.Fatalf("no proxy asks for r2 any more, and the key holds routes %v, want [r1] (the upstream subscription dropped)", held())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A proxy's VHDS alias is answered through the relay with the virtual
// host serving it, under the virtual host's own name with the alias; once
// no proxy asks for the alias, the key no longer holds the virtual host.
func TestKeyRelaysTheVirtualHostsItsProxiesAskFor(t *testing.T) {
	rc := xdstest.Route("edge", "c")
	rc.VirtualHosts[0].Domains = []string{"base.example.com"}
	rc.Vhds = &routev3.Vhds{ConfigSource: xdstest.ADS()}
	api := xdstest.Route("edge/api", "c").VirtualHosts[0]
	api.Domains = []string{"api.example.com"}
	up := xdstest.Start(t, xds.Options{})
	up.Publish(t, rc, api, xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
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

	s.Subscribe(xdstype.VirtualHostURL, "edge/api.example.com")
	got := s.RecvType(xdstype.VirtualHostURL)
	if len(got.Resources) != 1 || got.Resources[0].Name != "edge/api" || !slices.Equal(got.Resources[0].Aliases, []string{"edge/api.example.com"}) || got.Resources[0].Resource == nil {
		t.Fatalf("asked for alias edge/api.example.com: got %v, want virtual host edge/api for it", got.Resources)
	}
	s.ACK(got)
	s.Unsubscribe(xdstype.VirtualHostURL, "edge/api.example.com")
	held := func() int {
		r.mu.Lock()
		ks := r.keys["test-cluster"]
		r.mu.Unlock()
		return len(ks.client.State()[xdstype.VirtualHostURL])
	}
	deadline := time.Now().Add(10 * time.Second)
	for held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no proxy asks for the alias any more, and the key holds %d virtual hosts, want none", held())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func deltaNames(resp *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.Resources {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}
