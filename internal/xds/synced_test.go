package xds_test

import (
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// tracked feeds a server's events to a real status tracker, as the
// daemon's observer does, and to a recorder tests wait on. The tracker's
// fallback expectation is the group's version of the type, as the daemon's.
type tracked struct {
	*recorder
	tracker *status.Tracker
}

func newTracked(srv func() *xdstest.Server) *tracked {
	tr := status.NewTracker(status.Options{Expected: func(group, typeURL string) string {
		if f := srv().Publisher.Current(); f != nil {
			for _, g := range f.Groups() {
				if g.Name == group {
					return g.Snapshot.Set(typeURL).Version()
				}
			}
		}
		return ""
	}})
	return &tracked{recorder: newRecorder(), tracker: tr}
}

func (o *tracked) Observe(e *status.Event) {
	var info status.Info
	if n := e.Node; n != nil {
		info = status.Info{Node: n.GetId(), Cluster: n.GetCluster(), Agent: n.GetUserAgentName(), AgentVersion: n.GetUserAgentVersion()}
	}
	switch e.Kind {
	case status.StreamRefused:
		o.tracker.Refused(e.StreamID, info, e.Reason, e.Detail, e.At)
	case status.StreamOpened:
		// As the daemon's tracking: the stream keeps what it sends and
		// its client ACKs and should hold, and the tracker reads it there.
		o.tracker.Seen(e.StreamID, info, e.Group, e.At)
		o.tracker.Attach(e.StreamID, info, e.Status, e.At)
	case status.StreamClosed:
		o.tracker.Closed(e.StreamID, e.At)
	case status.Subscribed:
		o.tracker.Requested(e.StreamID, info, e.TypeURL, e.At)
	case status.RequestNACK:
		o.tracker.NACKed(e.StreamID, info, e.TypeURL, status.NACK{Version: e.Version, Nonce: e.Nonce, At: e.At})
	}
	// After the tracker: whoever wakes finds the state updated.
	o.recorder.Observe(e)
}

// state is node's state of typeURL now.
func (o *tracked) state(node, typeURL string) string {
	for _, s := range o.tracker.Streams() {
		for _, ty := range s.Types {
			if s.Node == node && s.Gone == nil && ty.Type == typeURL {
				return ty.State
			}
		}
	}
	return ""
}

// acked waits for the ACK of nonce by node.
func (o *tracked) acked(t *testing.T, node, nonce string) {
	t.Helper()
	o.wait(t, func(e status.Event) bool {
		return e.Kind == status.RequestACK && e.NodeID() == node && e.Nonce == nonce
	})
}

// waitCount waits until n events match ok, failing after a bound.
func (o *tracked) waitCount(t *testing.T, n int, ok func(status.Event) bool) {
	t.Helper()
	deadline := time.After(xdstest.Timeout)
	for o.count(ok) < n {
		select {
		case <-o.recorder.wake:
		case <-deadline:
			t.Fatalf("fewer than %d matching events within %v", n, xdstest.Timeout)
		}
	}
}

// A proxy that subscribes to one EDS name (as proxyless gRPC does, and
// Envoy for EDS and RDS) holds the latest of what it subscribes to after a
// change elsewhere in the type: it is SYNCED, not STALE for good. A change
// to its own resource makes it STALE until it ACKs, then SYNCED.
func TestSyncedMeansSubscribedNamesLatest(t *testing.T) {
	for _, kind := range []string{"ADS", "EDS"} {
		t.Run(kind, func(t *testing.T) {
			var srv *xdstest.Server
			obs := newTracked(func() *xdstest.Server { return srv })
			srv = xdstest.Start(t, xds.Options{Observer: obs})
			srv.Publish(t, base()...)
			conn := xdstest.Dial(t, srv.Addr)
			s := xdstest.OpenADS(t, conn, xdstest.Node("grpc-1"))
			if kind == "EDS" {
				s = xdstest.OpenType(t, conn, srv.Registry.Lookup(eds), xdstest.Node("grpc-1"))
			}
			s.Request(eds, "a")
			r := s.RecvType(eds)
			wantNames(t, r, "a")
			s.ACK(r, "a")
			obs.acked(t, "grpc-1", r.Nonce)
			if st := obs.state("grpc-1", eds); st != status.Synced {
				t.Fatalf("after the ACK of its first response: %s, want SYNCED", st)
			}

			// Another cluster's endpoints change: nothing to send here.
			world := base()
			world[3] = xdstest.Endpoints("b", 1002, 1003)
			srv.Publish(t, world...)
			// A request is answered only after the stream has served the
			// newest fleet: this repeat ACK is the point after which the
			// stream has seen the change.
			s.ACK(r, "a")
			obs.waitCount(t, 2, func(e status.Event) bool {
				return e.Kind == status.RequestACK && e.NodeID() == "grpc-1" && e.Nonce == r.Nonce
			})
			if st := obs.state("grpc-1", eds); st != status.Synced {
				t.Fatalf("after a change to a cluster it does not subscribe to: %s, want SYNCED", st)
			}
			if n := obs.tracker.States(); n[status.Synced] != 1 || n[status.Stale] != 0 {
				t.Fatalf("counted %v, want one SYNCED", n)
			}

			// Its own endpoints change: STALE until it ACKs.
			world[2] = xdstest.Endpoints("a", 1001, 1004)
			srv.Publish(t, world...)
			r2 := s.RecvType(eds)
			obs.wait(t, func(e status.Event) bool { return e.Kind == status.ResponseSent && e.Nonce == r2.Nonce })
			if st := obs.state("grpc-1", eds); st != status.Stale {
				t.Fatalf("sent a change, not ACKed yet: %s, want STALE", st)
			}
			s.ACK(r2, "a")
			obs.acked(t, "grpc-1", r2.Nonce)
			if st := obs.state("grpc-1", eds); st != status.Synced {
				t.Fatalf("after the ACK of its change: %s, want SYNCED", st)
			}
		})
	}
}

// The same over delta, where every response carries the type's whole-set
// version: a change elsewhere in the type leaves the stream SYNCED.
func TestSyncedMeansSubscribedNamesLatestDelta(t *testing.T) {
	var srv *xdstest.Server
	obs := newTracked(func() *xdstest.Server { return srv })
	srv = xdstest.Start(t, xds.Options{Observer: obs})
	world := base()
	srv.Publish(t, world...)
	d := xdstest.OpenDeltaADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("grpc-1"))
	d.Subscribe(eds, "a")
	r := d.RecvType(eds)
	d.ACK(r)
	obs.acked(t, "grpc-1", r.Nonce)
	if st := obs.state("grpc-1", eds); st != status.Synced {
		t.Fatalf("after the ACK of its first response: %s, want SYNCED", st)
	}

	world[3] = xdstest.Endpoints("b", 1002, 1003)
	srv.Publish(t, world...)
	// A request is answered only after the stream has served the newest
	// fleet; one for a type Pylon does not serve is reported as ignored.
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: "type.googleapis.com/pylon.test.Probe"})
	obs.wait(t, func(e status.Event) bool { return e.Kind == status.RequestIgnored })
	if st := obs.state("grpc-1", eds); st != status.Synced {
		t.Fatalf("after a change to a cluster it does not subscribe to: %s, want SYNCED", st)
	}

	world[2] = xdstest.Endpoints("a", 1001, 1004)
	srv.Publish(t, world...)
	r2 := d.RecvType(eds)
	obs.wait(t, func(e status.Event) bool { return e.Kind == status.ResponseSent && e.Nonce == r2.Nonce })
	if st := obs.state("grpc-1", eds); st != status.Stale {
		t.Fatalf("sent a change, not ACKed yet: %s, want STALE", st)
	}
	// Answering an old response again is no ACK of anything.
	d.ACK(r)
	d.ACK(r2)
	obs.acked(t, "grpc-1", r2.Nonce)
	if st := obs.state("grpc-1", eds); st != status.Synced {
		t.Fatalf("after the ACK of its change: %s, want SYNCED", st)
	}
	if n := obs.count(func(e status.Event) bool { return e.Kind == status.RequestACK }); n != 2 {
		t.Fatalf("%d ACKs reported, want 2: a repeated nonce is not an ACK", n)
	}
}

// tcpListener is a listener proxying TCP to cluster: a Listener that must
// wait for its cluster, as a route does.
func tcpListener(name, cluster string, port uint32) *listenerv3.Listener {
	l := ingress(name, "unused", port)
	tcp, err := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: name, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}})
	if err != nil {
		panic(err)
	}
	l.FilterChains[0].Filters[0] = &listenerv3.Filter{Name: "tcp", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tcp}}
	return l
}

// A new route held back for a cluster the client has not ACKed is missing
// from what the client holds: its type is STALE, not SYNCED, even when a
// response of the type went out (another route changed) and was ACKed, and
// when a type planned before it in the same pass (a Listener waiting for
// the same cluster) held something back too. It is SYNCED once the route
// is sent and ACKed.
func TestHeldBackRouteNotSynced(t *testing.T) {
	var srv *xdstest.Server
	obs := newTracked(func() *xdstest.Server { return srv })
	srv = xdstest.Start(t, xds.Options{Observer: obs, HoldTimeout: time.Minute})
	srv.Publish(t, base()...)
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("n1"))
	for _, req := range []struct {
		url   string
		names []string
	}{{cds, nil}, {lds, nil}, {rds, []string{"r1", "r2"}}} {
		s.Request(req.url, req.names...)
		r := s.RecvType(req.url)
		s.ACK(r, req.names...)
		obs.acked(t, "n1", r.Nonce)
	}
	if st := obs.state("n1", rds); st != status.Synced {
		t.Fatalf("after its first config: RDS %s, want SYNCED", st)
	}

	// r1 changes (to a cluster the client has), r2 appears naming the new
	// cluster c, and so does a new listener l2.
	world := base()
	world[5] = xdstest.Route("r1", "b")
	world = append(world, xdstest.Cluster("c"), xdstest.Endpoints("c", 1003), tcpListener("l2", "c", 10001), xdstest.Route("r2", "c"))
	srv.Publish(t, world...)
	c := s.RecvType(cds) // not ACKed yet: l2 and r2 wait for it
	r := s.RecvType(rds)
	if got := names(t, r); len(got) != 1 || got[0] != "r1" {
		t.Fatalf("routes %v sent before their cluster was ACKed, want [r1]", got)
	}
	s.ACK(r, "r1", "r2")
	obs.acked(t, "n1", r.Nonce)
	for _, url := range []string{lds, rds} {
		if st := obs.state("n1", url); st != status.Stale {
			t.Errorf("%s with a new resource held back, the response ACKed: %s, want STALE", url, st)
		}
	}

	s.ACK(c)
	l := s.RecvType(lds)
	s.ACK(l)
	obs.acked(t, "n1", l.Nonce)
	r = s.RecvType(rds)
	wantNames(t, r, "r1", "r2")
	s.ACK(r, "r1", "r2")
	obs.acked(t, "n1", r.Nonce)
	for _, url := range []string{cds, lds, rds} {
		if st := obs.state("n1", url); st != status.Synced {
			t.Errorf("%s after everything is sent and ACKed: %s, want SYNCED", url, st)
		}
	}
}

// The same over delta: the response that changed r1 while r2 waits does
// not bring the client to the set's version.
func TestHeldBackRouteNotSyncedDelta(t *testing.T) {
	var srv *xdstest.Server
	obs := newTracked(func() *xdstest.Server { return srv })
	srv = xdstest.Start(t, xds.Options{Observer: obs, HoldTimeout: time.Minute})
	srv.Publish(t, base()...)
	d := xdstest.OpenDeltaADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("n1"))
	for _, req := range []struct {
		url   string
		names []string
	}{{cds, nil}, {lds, nil}, {rds, []string{"r1", "r2"}}} {
		d.Subscribe(req.url, req.names...)
		r := d.RecvType(req.url)
		d.ACK(r)
		obs.acked(t, "n1", r.Nonce)
	}
	if st := obs.state("n1", rds); st != status.Synced {
		t.Fatalf("after its first config: RDS %s, want SYNCED", st)
	}

	world := base()
	world[5] = xdstest.Route("r1", "b")
	world = append(world, xdstest.Cluster("c"), xdstest.Endpoints("c", 1003), tcpListener("l2", "c", 10001), xdstest.Route("r2", "c"))
	srv.Publish(t, world...)
	c := d.RecvType(cds)
	r := d.RecvType(rds)
	if len(r.Resources) != 1 || r.Resources[0].Name != "r1" {
		t.Fatalf("%d routes sent before their cluster was ACKed, want r1 alone", len(r.Resources))
	}
	d.ACK(r)
	obs.acked(t, "n1", r.Nonce)
	for _, url := range []string{lds, rds} {
		if st := obs.state("n1", url); st != status.Stale {
			t.Errorf("%s with a new resource held back, the response ACKed: %s, want STALE", url, st)
		}
	}

	d.ACK(c)
	l := d.RecvType(lds)
	d.ACK(l)
	obs.acked(t, "n1", l.Nonce)
	r = d.RecvType(rds)
	if len(r.Resources) != 1 || r.Resources[0].Name != "r2" {
		t.Fatalf("%d routes sent once the cluster was ACKed, want r2 alone", len(r.Resources))
	}
	d.ACK(r)
	obs.acked(t, "n1", r.Nonce)
	for _, url := range []string{cds, lds, rds} {
		if st := obs.state("n1", url); st != status.Synced {
			t.Errorf("%s after everything is sent and ACKed: %s, want SYNCED", url, st)
		}
	}
}
