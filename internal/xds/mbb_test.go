package xds_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// routeTable is a route configuration sending each prefix to a cluster, in
// the order given (longest prefixes first is the caller's business).
func routeTable(name string, prefixes ...string) *routev3.RouteConfiguration {
	vh := &routev3.VirtualHost{Name: name, Domains: []string{"*"}}
	for i := 0; i+1 < len(prefixes); i += 2 {
		vh.Routes = append(vh.Routes, &routev3.Route{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefixes[i]}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: prefixes[i+1]}}},
		})
	}
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{vh}}
}

// ingress is an Envoy listener on a port using route configuration route.
func ingress(name, route string, port uint32) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: xdstest.HCM(route)},
		}}}},
	}
}

// payments is the seeds' scenario: /pay goes to payments-v1 or, after the
// change, to payments-v2, and v1 is retired, all in one config change.
func payments(version int) []any {
	v := fmt.Sprintf("payments-v%d", version)
	return []any{
		xdstest.Cluster("web"), xdstest.Endpoints("web", 8080),
		xdstest.Cluster(v), xdstest.Endpoints(v, uint32(9000+version)),
		ingress("ingress", "routes", 10000),
		routeTable("routes", "/pay", v, "/", "web"),
	}
}

func startMBB(t *testing.T, hold time.Duration) *env {
	t.Helper()
	return serveUnpublished(t, xds.Options{HoldTimeout: hold})
}

func noViolations(t *testing.T, p *xdstest.Proxy) {
	t.Helper()
	if len(p.Violations) > 0 {
		t.Fatalf("%d invariant violations, first: %s", len(p.Violations), strings.Join(p.Violations[:min(5, len(p.Violations))], "\n"))
	}
}

func wantRoute(t *testing.T, p *xdstest.Proxy, clusters ...string) {
	t.Helper()
	if got := p.RouteTargets()["routes"]; !slices.Equal(got, clusters) {
		t.Fatalf("route names %v, want %v", got, clusters)
	}
}

func wantClusters(t *testing.T, p *xdstest.Proxy, names ...string) {
	t.Helper()
	var got []string
	for n := range p.Clusters {
		got = append(got, n)
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Fatalf("proxy holds clusters %v, want %v", got, names)
	}
}

// waitACKs waits until the server has processed an ACK of each type from
// node id, so that what follows does not race the client's ACKs.
func (e *env) waitACKs(t *testing.T, id string, types ...string) {
	t.Helper()
	for _, url := range types {
		e.rec.wait(t, func(ev status.Event) bool {
			return ev.Kind == status.RequestACK && ev.TypeURL == url && ev.NodeID() == id
		})
	}
}

func variants(t *testing.T, f func(t *testing.T, delta bool)) {
	t.Run("sotw", func(t *testing.T) { f(t, false) })
	t.Run("delta", func(t *testing.T) { f(t, true) })
}

func TestMakeBeforeBreak(t *testing.T) {
	t.Run("X37_X39_payments_shift_and_retire", func(t *testing.T) {
		variants(t, func(t *testing.T, delta bool) {
			e := startMBB(t, 0)
			e.srv.Publish(t, payments(1)...)
			p := xdstest.NewProxy(t, e.conn, "envoy", delta)
			p.Settle()
			wantRoute(t, p, "payments-v1", "web")
			e.srv.Publish(t, payments(2)...)
			p.Settle()
			noViolations(t, p)
			wantRoute(t, p, "payments-v2", "web")
			wantClusters(t, p, "payments-v2", "web")
		})
	})

	t.Run("slow_ack_holds_the_route", func(t *testing.T) {
		variants(t, func(t *testing.T, delta bool) {
			e := startMBB(t, time.Minute)
			e.srv.Publish(t, payments(1)...)
			p := xdstest.NewProxy(t, e.conn, "envoy", delta)
			p.Settle()
			p.Slow[cds] = true
			e.srv.Publish(t, payments(2)...)
			p.Settle()
			noViolations(t, p)
			// The proxy has payments-v2 but has not ACKed it: the route
			// still sends /pay to v1, which stays.
			wantRoute(t, p, "payments-v1", "web")
			wantClusters(t, p, "payments-v1", "payments-v2", "web")
			p.ReleaseACKs()
			p.Settle()
			noViolations(t, p)
			wantRoute(t, p, "payments-v2", "web")
			wantClusters(t, p, "payments-v2", "web")
		})
	})

	t.Run("hold_is_bounded", func(t *testing.T) {
		variants(t, func(t *testing.T, delta bool) {
			e := startMBB(t, 100*time.Millisecond)
			e.srv.Publish(t, payments(1)...)
			p := xdstest.NewProxy(t, e.conn, "envoy", delta)
			p.Settle()
			p.Slow[cds] = true // and it never ACKs clusters again
			e.srv.Publish(t, payments(2)...)
			for range 100 {
				if slices.Equal(p.RouteTargets()["routes"], []string{"payments-v2", "web"}) {
					break
				}
				p.Step()
			}
			noViolations(t, p)
			wantRoute(t, p, "payments-v2", "web")
		})
	})

	t.Run("nacked_cluster_holds_its_dependents", func(t *testing.T) {
		variants(t, func(t *testing.T, delta bool) {
			// The bound must outlast the proxy's NACK on a loaded machine:
			// before the NACK arrives, the hold is an ordinary bounded one.
			e := startMBB(t, time.Second)
			e.srv.Publish(t, payments(1)...)
			p := xdstest.NewProxy(t, e.conn, "envoy", delta)
			p.Settle()
			bad := int64(1)
			p.Reject = func(m proto.Message) string {
				if c, ok := m.(*clusterv3.Cluster); ok && c.Name == "payments-v2" && c.ConnectTimeout.GetSeconds() == bad {
					return "payments-v2: rejected by the proxy"
				}
				return ""
			}
			e.srv.Publish(t, payments(2)...)
			p.Settle()
			// Past the hold bound too: a rejected dependency holds the route
			// until the config changes, and v1 stays.
			time.Sleep(1200 * time.Millisecond) // let the bound pass; nothing may change
			p.Settle()
			noViolations(t, p)
			wantRoute(t, p, "payments-v1", "web")
			wantClusters(t, p, "payments-v1", "web")
			ev := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestNACK && ev.TypeURL == cds })
			if !strings.Contains(ev.Detail, "payments-v2") {
				t.Fatalf("NACK detail %q", ev.Detail)
			}
			// A fixed payments-v2 is accepted and the shift completes.
			world := payments(2)
			world[2].(*clusterv3.Cluster).ConnectTimeout.Seconds = 2
			e.srv.Publish(t, world...)
			p.Settle()
			noViolations(t, p)
			wantRoute(t, p, "payments-v2", "web")
			wantClusters(t, p, "payments-v2", "web")
		})
	})

	t.Run("property_random_changes", func(t *testing.T) {
		variants(t, func(t *testing.T, delta bool) {
			for seed := uint64(1); seed <= 8; seed++ {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					randomChanges(t, seed, delta)
				})
			}
		})
	})
}

// randomWorld is a consistent config drawn at random: some of six EDS
// clusters (with random versions), one or two listeners, and routes sending
// prefixes to random clusters of the world.
func randomWorld(rng *rand.Rand) []any {
	var clusters []string
	var out []any
	for i := range 6 {
		if rng.IntN(2) == 0 {
			continue
		}
		n := fmt.Sprintf("c%d", i)
		c := xdstest.Cluster(n)
		c.ConnectTimeout.Seconds = int64(1 + rng.IntN(3))
		out = append(out, c, xdstest.Endpoints(n, uint32(1000+rng.IntN(3))))
		clusters = append(clusters, n)
	}
	if len(clusters) == 0 {
		out = append(out, xdstest.Cluster("c0"), xdstest.Endpoints("c0", 1000))
		clusters = []string{"c0"}
	}
	table := func(name string) *routev3.RouteConfiguration {
		var prefixes []string
		for j := range 1 + rng.IntN(3) {
			prefixes = append(prefixes, fmt.Sprintf("/p%d", j), clusters[rng.IntN(len(clusters))])
		}
		return routeTable(name, prefixes...)
	}
	out = append(out, ingress("l0", "r0", 10000), table("r0"))
	if rng.IntN(2) == 0 {
		out = append(out, ingress("l1", "r1", 10001), table("r1"))
	}
	return out
}

// randomChanges publishes a run of random worlds while the proxy reads at
// its own pace, some of them before it has caught up, and checks the
// invariants after every message.
func randomChanges(t *testing.T, seed uint64, delta bool) {
	rng := rand.New(rand.NewPCG(seed, 0))
	e := startMBB(t, time.Minute)
	world := randomWorld(rng)
	e.srv.Publish(t, world...)
	p := xdstest.NewProxy(t, e.conn, "envoy", delta)
	p.Trace = func(s string) { t.Log(s) }
	p.Settle()
	for range 25 {
		world = randomWorld(rng)
		e.srv.Publish(t, world...)
		t.Logf("published %v", summary(world))
		switch rng.IntN(3) {
		case 0:
			p.Settle()
		case 1:
			for range rng.IntN(4) {
				p.StepIfReady()
			}
		}
		noViolations(t, p)
	}
	p.Settle()
	noViolations(t, p)
	// Settled on the last world: exactly its clusters and routes.
	want := xdstest.Snapshot(t, e.srv.Registry, world...)
	var clusters []string
	for n := range p.Clusters {
		clusters = append(clusters, n)
	}
	slices.Sort(clusters)
	if !slices.Equal(clusters, want.Set(cds).Names()) {
		t.Fatalf("settled with clusters %v, want %v", clusters, want.Set(cds).Names())
	}
	for n, rc := range p.Routes {
		if !proto.Equal(rc, want.Set(rds).Get(n).Message) {
			t.Fatalf("route %s differs from the last world", n)
		}
	}
}

func summary(world []any) string {
	var b strings.Builder
	for _, m := range world {
		switch v := m.(type) {
		case *clusterv3.Cluster:
			fmt.Fprintf(&b, "C:%s/%d ", v.Name, v.ConnectTimeout.Seconds)
		case *routev3.RouteConfiguration:
			fmt.Fprintf(&b, "R:%s->", v.Name)
			for _, r := range v.VirtualHosts[0].Routes {
				fmt.Fprintf(&b, "%s,", r.GetRoute().GetCluster())
			}
			b.WriteString(" ")
		case *listenerv3.Listener:
			fmt.Fprintf(&b, "L:%s ", v.Name)
		}
	}
	return b.String()
}

// Per-type streams of one node coordinate: the RDS stream holds a route until
// the node's CDS stream has ACKed the cluster it names (and the EDS stream
// its assignment).
func TestMakeBeforeBreakPerTypeStreams(t *testing.T) {
	world := func(v int) []any { return append(payments(v), routeTable("other", "/", "web")) }
	routeTargets := func(t *testing.T, rc proto.Message) []string { return xdstest.Refs(rc) }

	t.Run("sotw", func(t *testing.T) {
		e := startMBB(t, time.Minute)
		reg := e.srv.Registry
		e.srv.Publish(t, world(1)...)
		node := xdstest.Node("split")
		c := xdstest.OpenType(t, e.conn, reg.Lookup(cds), node)
		c.Request(cds)
		c.RecvType(cds)
		c.Request(cds)
		ep := xdstest.OpenType(t, e.conn, reg.Lookup(eds), node)
		ep.Request(eds, "payments-v1", "web")
		ep.RecvType(eds)
		ep.Request(eds, "payments-v1", "web")
		e.waitACKs(t, "split", cds, eds)
		rt := xdstest.OpenType(t, e.conn, reg.Lookup(rds), node)
		rt.Request(rds, "routes")
		rt.RecvType(rds)
		rt.Request(rds, "routes")
		e.waitACKs(t, "split", cds, eds, rds)

		e.srv.Publish(t, world(2)...)
		cr := c.RecvType(cds)
		wantNames(t, cr, "payments-v1", "payments-v2", "web")
		// Ask the route stream for one more route: its answer shows that
		// "routes" is still the v1 layout, held for the CDS stream's ACK.
		rt.Request(rds, "routes", "other")
		r := rt.RecvType(rds)
		for _, a := range r.Resources {
			m, _ := a.UnmarshalNew()
			if xdstype.NameOf(m) == "routes" && !slices.Contains(routeTargets(t, m), "payments-v1") {
				t.Fatalf("route shifted to %v before the node's CDS stream ACKed payments-v2", routeTargets(t, m))
			}
		}
		rt.Request(rds, "routes", "other")
		c.ACK(cr)
		ep.Request(eds, "payments-v1", "payments-v2", "web")
		ep.RecvType(eds)
		ep.Request(eds, "payments-v1", "payments-v2", "web")
		r = rt.RecvType(rds)
		var shifted bool
		for _, a := range r.Resources {
			m, _ := a.UnmarshalNew()
			if xdstype.NameOf(m) == "routes" {
				shifted = slices.Contains(routeTargets(t, m), "payments-v2")
			}
		}
		if !shifted {
			t.Fatal("route did not shift once the cluster and its assignment were ACKed")
		}
	})

	t.Run("delta", func(t *testing.T) {
		e := startMBB(t, time.Minute)
		reg := e.srv.Registry
		e.srv.Publish(t, world(1)...)
		node := xdstest.Node("split-delta")
		c := xdstest.OpenDeltaType(t, e.conn, reg.Lookup(cds), node)
		c.Subscribe(cds)
		c.ACK(c.RecvType(cds))
		ep := xdstest.OpenDeltaType(t, e.conn, reg.Lookup(eds), node)
		ep.Subscribe(eds, "payments-v1", "web")
		ep.ACK(ep.RecvType(eds))
		e.waitACKs(t, "split-delta", cds, eds)
		rt := xdstest.OpenDeltaType(t, e.conn, reg.Lookup(rds), node)
		rt.Subscribe(rds, "routes")
		rt.ACK(rt.RecvType(rds))
		e.waitACKs(t, "split-delta", cds, eds, rds)

		e.srv.Publish(t, world(2)...)
		cr := c.RecvType(cds)
		wantDelta(t, cr, []string{"payments-v2"}, nil)
		// The route stream answers a new subscription but keeps "routes".
		rt.Subscribe(rds, "other")
		wantDelta(t, rt.RecvType(rds), []string{"other"}, nil)
		c.ACK(cr)
		ep.Subscribe(eds, "payments-v2")
		ep.ACK(ep.RecvType(eds))
		r := rt.RecvType(rds)
		wantDelta(t, r, []string{"routes"}, nil)
		m, _ := r.Resources[0].Resource.UnmarshalNew()
		if !slices.Contains(routeTargets(t, m), "payments-v2") {
			t.Fatalf("route names %v", routeTargets(t, m))
		}
	})
}
