package xds_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// stepClock is an injected drain clock: each connection's turn waits until
// the test fires it, and the offsets Drain asked for are recorded.
type stepClock struct {
	turns chan turn
}

type turn struct {
	offset time.Duration
	fire   chan time.Time
}

func newStepClock() *stepClock { return &stepClock{turns: make(chan turn, 64)} }

func (c *stepClock) at(offset time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.turns <- turn{offset: offset, fire: ch}
	return ch
}

// next returns Drain's next request for a turn, failing after a bound.
func (c *stepClock) next(t *testing.T) turn {
	t.Helper()
	select {
	case tr := <-c.turns:
		return tr
	case <-time.After(xdstest.Timeout):
		t.Fatalf("Drain asked for no turn within %v", xdstest.Timeout)
	}
	return turn{}
}

// drainConn is a client connection with two ADS streams that received
// their first response.
type drainConn struct {
	conn    *grpc.ClientConn
	streams []*xdstest.Stream
}

func openDrainConns(t *testing.T, srv *xdstest.Server, n int) []drainConn {
	t.Helper()
	out := make([]drainConn, n)
	for i := range out {
		out[i].conn = xdstest.Dial(t, srv.Addr)
		for range 2 {
			s := xdstest.OpenADS(t, out[i].conn, xdstest.Node("envoy"))
			s.Request(cds)
			s.RecvType(cds)
			out[i].streams = append(out[i].streams, s)
		}
	}
	return out
}

// wantUnavailable waits for s to end and checks it ended with UNAVAILABLE.
func wantUnavailable(t *testing.T, s *xdstest.Stream, what string) {
	t.Helper()
	err := s.Err()
	if grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("%s ended with %v, want UNAVAILABLE", what, err)
	}
}

// alive proves s is still served: a probe request is answered.
func alive(t *testing.T, s *xdstest.Stream) {
	t.Helper()
	s.ExpectSilence()
}

// closed waits until conn leaves READY: the server closed it.
func closed(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	for conn.GetState() == connectivity.Ready {
		if !conn.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatalf("connection still open after %v", xdstest.Timeout)
		}
	}
}

func drainAsync(srv *xdstest.Server, ctx context.Context, period time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- srv.XDS.Drain(ctx, period) }()
	return done
}

func waitDrain(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(xdstest.Timeout):
		t.Fatalf("Drain did not return within %v", xdstest.Timeout)
	}
	return nil
}

func TestDrain(t *testing.T) {
	t.Run("connection_by_connection_spread_over_period", func(t *testing.T) {
		rec := newRecorder()
		srv := xdstest.Start(t, xds.Options{Observer: rec})
		srv.Publish(t, base()...)
		clock := newStepClock()
		xds.SetDrainClock(srv.XDS, clock.at)
		conns := openDrainConns(t, srv, 4)
		done := drainAsync(srv, context.Background(), 400*time.Millisecond)

		for i, c := range conns {
			tr := clock.next(t)
			if want := time.Duration(i) * 100 * time.Millisecond; tr.offset != want {
				t.Fatalf("connection %d ends at %v into the drain, want %v", i, tr.offset, want)
			}
			// Before its turn, the connection's streams are served.
			alive(t, c.streams[0])
			if i == 1 {
				// A new stream during the drain is refused, on a new
				// connection as on an old one.
				fresh := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("late"))
				// Refused at once: the send may already find it ended.
				_ = fresh.TrySend(&discoveryv3.DiscoveryRequest{TypeUrl: cds})
				err := fresh.Err()
				if grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(grpcstatus.Convert(err).Message(), "draining") {
					t.Fatalf("a new stream during the drain ended with %v, want UNAVAILABLE saying the replica drains", err)
				}
				rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamRefused && e.Reason == xds.RefusedDraining })
				// A stream refused on a connection whose streams wait for
				// their turn leaves them alone.
				again := xdstest.OpenADS(t, conns[3].conn, xdstest.Node("late"))
				_ = again.TrySend(&discoveryv3.DiscoveryRequest{TypeUrl: cds})
				if err := again.Err(); grpcstatus.Code(err) != codes.Unavailable {
					t.Fatalf("a new stream on an old connection during the drain ended with %v, want UNAVAILABLE", err)
				}
			}
			tr.fire <- time.Now()
			for j, s := range c.streams {
				wantUnavailable(t, s, fmt.Sprintf("stream %d of connection %d", j, i))
			}
			closed(t, c.conn)
			if i+1 < len(conns) {
				// The next connection is still served: the ends are spread.
				alive(t, conns[i+1].streams[1])
			}
		}
		if err := waitDrain(t, done); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		if !srv.XDS.Draining() {
			t.Fatal("Draining() is false after Drain")
		}
		if err := srv.XDS.Drain(context.Background(), 0); err == nil {
			t.Fatal("a second Drain returned nil, want an error")
		}
	})

	t.Run("real_clock_ends_are_spread_and_ordered", func(t *testing.T) {
		rec := newRecorder()
		srv := xdstest.Start(t, xds.Options{Observer: rec})
		srv.Publish(t, base()...)
		conns := openDrainConns(t, srv, 2)
		start := time.Now()
		if err := srv.XDS.Drain(context.Background(), 200*time.Millisecond); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		// Drain returned: every stream ended, the first connection's (the
		// oldest streams, the lowest ids) first. The second connection's
		// turn is half the period in: its streams cannot end before.
		for _, c := range conns {
			for _, s := range c.streams {
				wantUnavailable(t, s, "a stream")
			}
		}
		isClosed := func(e status.Event) bool { return e.Kind == status.StreamClosed }
		deadline := time.After(xdstest.Timeout)
		for rec.count(isClosed) < 4 {
			select {
			case <-rec.wake:
			case <-deadline:
				t.Fatalf("fewer than 4 streams closed within %v", xdstest.Timeout)
			}
		}
		var ends []status.Event
		for _, e := range rec.all() {
			if isClosed(e) {
				ends = append(ends, e)
			}
		}
		if first := max(ends[0].StreamID, ends[1].StreamID); first > min(ends[2].StreamID, ends[3].StreamID) {
			t.Fatalf("streams ended in the order %d %d %d %d, want the first connection's (the older) first", ends[0].StreamID, ends[1].StreamID, ends[2].StreamID, ends[3].StreamID)
		}
		if second := ends[2].At.Sub(start); second < 100*time.Millisecond {
			t.Fatalf("the second connection's streams ended %v into the drain, before their turn at 100ms", second)
		}
	})

	t.Run("period_zero_ends_all_at_once", func(t *testing.T) {
		srv := xdstest.Start(t, xds.Options{})
		srv.Publish(t, base()...)
		clock := newStepClock()
		xds.SetDrainClock(srv.XDS, clock.at)
		conns := openDrainConns(t, srv, 3)
		done := drainAsync(srv, context.Background(), 0)
		for range conns {
			tr := clock.next(t)
			if tr.offset != 0 {
				t.Fatalf("turn at %v with a zero period", tr.offset)
			}
			tr.fire <- time.Now()
		}
		for _, c := range conns {
			for _, s := range c.streams {
				wantUnavailable(t, s, "a stream")
			}
		}
		if err := waitDrain(t, done); err != nil {
			t.Fatalf("Drain: %v", err)
		}
	})

	t.Run("context_cancel_stops_promptly", func(t *testing.T) {
		srv := xdstest.Start(t, xds.Options{})
		srv.Publish(t, base()...)
		clock := newStepClock()
		xds.SetDrainClock(srv.XDS, clock.at)
		conns := openDrainConns(t, srv, 2)
		ctx, cancel := context.WithCancel(context.Background())
		done := drainAsync(srv, ctx, time.Hour)
		clock.next(t).fire <- time.Now()
		wantUnavailable(t, conns[0].streams[0], "the first connection's stream")
		clock.next(t) // the second connection's turn, never fired
		cancel()
		if err := waitDrain(t, done); err != context.Canceled {
			t.Fatalf("Drain returned %v after its context was cancelled, want context.Canceled", err)
		}
		// What Drain left is Shutdown's: the stream is still served.
		alive(t, conns[1].streams[0])
	})

	t.Run("shutdown_during_drain_ends_it", func(t *testing.T) {
		// Shutdown ends what Drain has not: Drain then returns without
		// waiting for the remaining turns.
		srv := xdstest.Start(t, xds.Options{})
		srv.Publish(t, base()...)
		clock := newStepClock()
		xds.SetDrainClock(srv.XDS, clock.at)
		conns := openDrainConns(t, srv, 3)
		done := drainAsync(srv, context.Background(), time.Hour)
		clock.next(t).fire <- time.Now()
		wantUnavailable(t, conns[0].streams[0], "the first connection's stream")
		clock.next(t) // the second connection's turn, never fired
		srv.XDS.Shutdown()
		if err := waitDrain(t, done); err != nil {
			t.Fatalf("Drain after Shutdown: %v", err)
		}
		wantUnavailable(t, conns[2].streams[1], "the last connection's stream")
	})

	t.Run("idle_connection_closed_after_the_streams", func(t *testing.T) {
		// A connection without streams has nothing to spread: it closes
		// once every stream has ended, so its client too reconnects
		// elsewhere when it next needs the control plane.
		srv := xdstest.Start(t, xds.Options{})
		srv.Publish(t, base()...)
		clock := newStepClock()
		xds.SetDrainClock(srv.XDS, clock.at)
		conns := openDrainConns(t, srv, 1)
		idle := xdstest.Dial(t, srv.Addr)
		idle.Connect()
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
		defer cancel()
		for idle.GetState() != connectivity.Ready {
			if !idle.WaitForStateChange(ctx, idle.GetState()) {
				t.Fatal("the idle connection never connected")
			}
		}
		done := drainAsync(srv, context.Background(), time.Hour)
		tr := clock.next(t)
		alive(t, conns[0].streams[0])
		if idle.GetState() != connectivity.Ready {
			t.Fatal("the idle connection closed before the streams' turn")
		}
		tr.fire <- time.Now()
		wantUnavailable(t, conns[0].streams[0], "the stream")
		closed(t, idle)
		if err := waitDrain(t, done); err != nil {
			t.Fatalf("Drain: %v", err)
		}
	})

	t.Run("nothing_open", func(t *testing.T) {
		srv := xdstest.Start(t, xds.Options{})
		if err := srv.XDS.Drain(context.Background(), time.Hour); err != nil {
			t.Fatalf("Drain with no streams: %v", err)
		}
	})
}
