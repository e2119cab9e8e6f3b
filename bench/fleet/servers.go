package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // profiles of the server under load, on its control address
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	gcpserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/daemon"
	pylonfleet "github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// server is one implementation under test, in its own process, with a
// control endpoint the driver uses to make changes.
type server interface {
	set(w world) error
}

// fleetHash puts every node in one group, so go-control-plane serves one
// shared snapshot, as Pylon does.
type fleetHash struct{}

func (fleetHash) ID(*corev3.Node) string { return "fleet" }

type gcp struct {
	cache cache.SnapshotCache
	gen   int
	prev  map[types.ResponseType]string
	msgs  map[types.ResponseType][]proto.Message
}

func toResources(ms []proto.Message) []types.Resource {
	out := make([]types.Resource, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// set gives go-control-plane a fair snapshot: a version per resource type,
// bumped only when that type changed, so an EDS change does not resend
// clusters.
func (g *gcp) set(w world) error {
	g.gen++
	next := map[types.ResponseType][]proto.Message{
		types.Cluster: w.clusters, types.Endpoint: w.endpoints, types.Listener: w.listeners, types.Route: w.routes,
	}
	snap := &cache.Snapshot{}
	for t, ms := range next {
		v := g.prev[t]
		if v == "" || !sameMessages(g.msgs[t], ms) {
			v = strconv.Itoa(g.gen)
		}
		g.prev[t] = v
		snap.Resources[t] = cache.NewResources(v, toResources(ms))
	}
	g.msgs = next
	return g.cache.SetSnapshot(context.Background(), "fleet", snap)
}

func sameMessages(a, b []proto.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

type pylon struct {
	reg *xdstype.Registry
	pub *pylonfleet.Publisher
	obs *daemon.Observability
}

func (p *pylon) set(w world) error {
	var inputs []xdstype.Resource
	add := func(url string, ms []proto.Message) {
		for _, m := range ms {
			inputs = append(inputs, xdstype.Resource{Type: p.reg.Lookup(url), Name: xdstype.NameOf(m), Message: m})
		}
	}
	add(xdstype.ClusterURL, w.clusters)
	add(xdstype.EndpointURL, w.endpoints)
	add(xdstype.ListenerURL, w.listeners)
	add(xdstype.RouteURL, w.routes)
	s, err := snapshot.Build(p.reg, inputs)
	if err != nil {
		return err
	}
	f := pylonfleet.NewFleet(s, time.Now())
	p.pub.Publish(f)
	p.obs.Published(f)
	return nil
}

// serve runs impl ("pylon", "pylon-unobserved" or "gcp") until killed: xDS on a loopback port
// and a control endpoint (POST /set?eds=G&route=R); it prints both
// addresses on one line. With watch, Pylon also reports when each proxy is
// SYNCED and what it was sent (POST /mark, GET /synced: syncWatch).
// collect answers the driver's POST /gc. The driver reads resident memory
// twice: as it is, and after a collection that returns garbage to the OS
// (what the streams retain): the first collection only moves sync.Pool's
// caches aside, the second frees them.
func collect(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fmt.Fprintf(w, "goroutines %d, heap in use %.1f MB (live %.1f MB), stacks %.1f MB, other runtime %.1f MB",
		runtime.NumGoroutine(), float64(m.HeapInuse)/(1<<20), float64(m.HeapAlloc)/(1<<20), float64(m.StackInuse)/(1<<20),
		float64(m.MSpanInuse+m.MCacheInuse+m.BuckHashSys+m.GCSys+m.OtherSys)/(1<<20))
}

// gcCPU answers the CPU seconds the runtime reckons its garbage
// collector has used so far (an estimate from the time its workers ran,
// not the kernel's count), for the A/B scenario to tell the collector's
// share of a difference from the rest.
func gcCPU(w http.ResponseWriter, _ *http.Request) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		http.Error(w, "no GC CPU metric in this runtime", http.StatusNotImplemented)
		return
	}
	fmt.Fprintf(w, "%g", s[0].Value.Float64())
}

func serve(impl string, clusters int, watch bool) error {
	keep := grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true})
	var (
		g    *grpc.Server
		srv  server
		wrap = func(l net.Listener) net.Listener { return l }
	)
	switch impl {
	case "pylon", "pylon-unobserved":
		reg := xdstype.New()
		pub := pylonfleet.NewPublisher()
		// Status tracking, metrics, gRPC options and the tracked listener
		// as the daemon has them: Pylon as it runs, not a bare xDS server.
		obs := daemon.NewObservability(reg, pub)
		var observer status.Observer = obs.Observer
		if impl == "pylon-unobserved" {
			// A diagnostic, not Pylon as it runs: what status tracking
			// and metrics cost is the difference from "pylon". No
			// observer at all, so that the server also skips the lists
			// of what was sent, which it builds only for one.
			observer = nil
		}
		if watch {
			sw := newSyncWatch(obs.Observer, 4, groupVersion(pub), obs.Tracker.States)
			sw.handle(http.DefaultServeMux)
			observer = sw
		}
		// The simulator multiplexes hundreds of proxies on one connection
		// (a real proxy opens one or a few streams on its own): lift the
		// per-connection stream bound that guards against one client.
		x := xds.New(xds.Options{
			Registry: reg, Fleets: pub, Identifier: "pylon-bench", MaxInitialSends: 256, MaxRequestsPerSecond: -1,
			MaxStreamsPerConnection: 1 << 20, Observer: observer,
		})
		g = grpc.NewServer(append(x.GRPCOptions(), keep)...)
		x.Register(g)
		// The server's metrics, for the driver to read what it refused
		// (refusals).
		http.Handle("GET /metrics", promhttp.HandlerFor(obs.Metrics.Registry, promhttp.HandlerOpts{}))
		wrap = x.Listener
		srv = &pylon{reg: reg, pub: pub, obs: obs}
	case "gcp":
		c := cache.NewSnapshotCache(true, fleetHash{}, nil)
		var callbacks gcpserver.Callbacks
		if watch {
			sw := newSyncWatch(nopObserver{}, 4, gcpVersion(c), func() map[string]int { return nil })
			sw.handle(http.DefaultServeMux)
			callbacks = (&gcpFeed{w: sw, nodes: map[int64]*corev3.Node{}}).callbacks()
		}
		g = newGCPServer(context.Background(), c, callbacks)
		srv = &gcp{cache: c, prev: map[types.ResponseType]string{}}
	default:
		return fmt.Errorf("unknown implementation %q", impl)
	}
	if err := srv.set(makeWorld(clusters, 0, 0)); err != nil {
		return err
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	lis := wrap(raw)
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	http.HandleFunc("POST /set", func(w http.ResponseWriter, r *http.Request) {
		eds, _ := strconv.Atoi(r.URL.Query().Get("eds"))
		route, _ := strconv.Atoi(r.URL.Query().Get("route"))
		mu.Lock()
		defer mu.Unlock()
		if err := srv.set(makeWorld(clusters, eds, route)); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	http.HandleFunc("POST /gc", collect)
	http.HandleFunc("GET /gccpu", gcCPU)
	go func() { _ = http.Serve(ctl, nil) }()
	fmt.Printf("%s %s\n", lis.Addr(), ctl.Addr())
	return g.Serve(lis)
}

// newGCPServer is go-control-plane's ADS server over c, with the bounds
// the driver's fleet needs (keepalive pings, streams per connection), for
// ctx's lifetime.
func newGCPServer(ctx context.Context, c cache.Cache, callbacks gcpserver.Callbacks) *grpc.Server {
	keep := grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true})
	g := grpc.NewServer(keep, grpc.MaxConcurrentStreams(1<<20))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, gcpserver.NewServer(ctx, c, callbacks))
	return g
}

// groupVersion returns the version a group's current snapshot has of a
// type, as the daemon's status tracker reads it.
func groupVersion(pub *pylonfleet.Publisher) func(group, typeURL string) string {
	return func(group, typeURL string) string {
		if f := pub.Current(); f != nil {
			for _, g := range f.Groups() {
				if g.Name == group {
					return g.Snapshot.Set(typeURL).Version()
				}
			}
		}
		return ""
	}
}

type nopObserver struct{}

func (nopObserver) Observe(*status.Event) {}
