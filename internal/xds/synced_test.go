package xds_test

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

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

func (o *tracked) Observe(e xds.Event) {
	info := status.Info{
		Node: e.Node.GetId(), Cluster: e.Node.GetCluster(),
		Agent: e.Node.GetUserAgentName(), AgentVersion: e.Node.GetUserAgentVersion(),
	}
	switch e.Kind {
	case xds.StreamRefused:
		o.tracker.Refused(e.StreamID, info, e.Reason, e.Detail, e.At)
	case xds.StreamOpened, xds.ResponseSent:
		o.tracker.Seen(e.StreamID, info, e.Group, e.At)
		if e.Kind == xds.ResponseSent && !e.Heartbeat {
			o.tracker.Sent(e.StreamID, info, e.TypeURL, status.Stamp{Version: e.Version, Nonce: e.Nonce, At: e.At}, nil, nil)
		}
	case xds.StreamClosed:
		o.tracker.Closed(e.StreamID, e.At)
	case xds.Subscribed:
		o.tracker.Requested(e.StreamID, info, e.TypeURL, e.At)
	case xds.RequestACK:
		o.tracker.ACKed(e.StreamID, info, e.TypeURL, status.Stamp{Version: e.Version, Nonce: e.Nonce, At: e.At})
	case xds.RequestNACK:
		o.tracker.NACKed(e.StreamID, info, e.TypeURL, status.NACK{Version: e.Version, Nonce: e.Nonce, At: e.At})
	case xds.ExpectedVersion:
		o.tracker.Expect(e.StreamID, info, e.TypeURL, e.Version, e.At)
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
	o.wait(t, func(e xds.Event) bool {
		return e.Kind == xds.RequestACK && e.Node.GetId() == node && e.Nonce == nonce
	})
}

// waitCount waits until n events match ok, failing after a bound.
func (o *tracked) waitCount(t *testing.T, n int, ok func(xds.Event) bool) {
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
			obs.waitCount(t, 2, func(e xds.Event) bool {
				return e.Kind == xds.RequestACK && e.Node.GetId() == "grpc-1" && e.Nonce == r.Nonce
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
			obs.wait(t, func(e xds.Event) bool { return e.Kind == xds.ResponseSent && e.Nonce == r2.Nonce })
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
	obs.wait(t, func(e xds.Event) bool { return e.Kind == xds.RequestIgnored })
	if st := obs.state("grpc-1", eds); st != status.Synced {
		t.Fatalf("after a change to a cluster it does not subscribe to: %s, want SYNCED", st)
	}

	world[2] = xdstest.Endpoints("a", 1001, 1004)
	srv.Publish(t, world...)
	r2 := d.RecvType(eds)
	obs.wait(t, func(e xds.Event) bool { return e.Kind == xds.ResponseSent && e.Nonce == r2.Nonce })
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
	if n := obs.count(func(e xds.Event) bool { return e.Kind == xds.RequestACK }); n != 2 {
		t.Fatalf("%d ACKs reported, want 2: a repeated nonce is not an ACK", n)
	}
}
