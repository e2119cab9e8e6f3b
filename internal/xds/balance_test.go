package xds_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// shardLoad is what fleetstatus would say of the shard: a fleet of
// streams on replicas, fresh or not; set by the test.
type shardLoad struct {
	mu   sync.Mutex
	load guard.Load
}

func (l *shardLoad) set(g guard.Load) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.load = g
}

func (l *shardLoad) get(int) guard.Load {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.load
}

// balanceCounts hears what balancing does.
type balanceCounts struct {
	looks, refused, shedDelta, shedSotW atomic.Int64
	target                              atomic.Int64
}

func (c *balanceCounts) BalanceTarget(n int) { c.target.Store(int64(n)); c.looks.Add(1) }
func (c *balanceCounts) BalanceRefused()     { c.refused.Add(1) }
func (c *balanceCounts) BalanceShed(delta bool) {
	if delta {
		c.shedDelta.Add(1)
	} else {
		c.shedSotW.Add(1)
	}
}

// waitLooks waits until balancing has looked at the load n more times.
func (c *balanceCounts) waitLooks(t *testing.T, n int64) {
	t.Helper()
	want := c.looks.Load() + n
	deadline := time.Now().Add(xdstest.Timeout)
	for c.looks.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("balancing looked at the load %d times within %v, want %d more", c.looks.Load(), xdstest.Timeout, n)
		}
		time.Sleep(10 * time.Millisecond) // polling a counter the loop bumps about once a second
	}
}

func openSotW(t *testing.T, srv *xdstest.Server, node string) (*xdstest.Stream, error) {
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node(node))
	if err := s.TrySend(&discoveryv3.DiscoveryRequest{Node: xdstest.Node(node), TypeUrl: cds}); err != nil {
		return s, s.Err()
	}
	if _, err := s.Next(); err != nil {
		return s, err
	}
	return s, nil
}

// A replica over its share of a fresh count refuses a new stream with
// RESOURCE_EXHAUSTED naming why, and closes its connection; under it, or
// with a stale count, it takes the stream.
func TestBalanceRefusesNewStreamsOverTheTarget(t *testing.T) {
	load := &shardLoad{}
	// 4 streams on 2 replicas: a target of 4 (the mean, 2, plus the slack).
	load.set(guard.Load{Replicas: 2, Streams: 4, Fresh: true})
	counts := &balanceCounts{}
	rec := newRecorder()
	srv := xdstest.Start(t, xds.Options{Observer: rec, Balance: &xds.Balance{Load: load.get, Report: counts}})
	srv.Publish(t, base()...)
	for i := range 4 {
		if _, err := openSotW(t, srv, fmt.Sprintf("taken-%d", i)); err != nil {
			t.Fatalf("stream %d of a target of 4: %v", i, err)
		}
	}
	s, err := openSotW(t, srv, "over")
	if err == nil {
		err = s.Err()
	}
	msg := grpcstatus.Convert(err).Message()
	if grpcstatus.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "over its share") || !strings.Contains(msg, "target 4") {
		t.Fatalf("the fifth stream of a target of 4 ended with %v, want RESOURCE_EXHAUSTED saying the replica is over its share", err)
	}
	rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamRefused && e.Reason == xds.RefusedBalance })
	if counts.refused.Load() != 1 {
		t.Errorf("%d refusals reported for balance, want 1", counts.refused.Load())
	}

	load.set(guard.Load{Replicas: 2, Streams: 4})
	if _, err := openSotW(t, srv, "stale"); err != nil {
		t.Fatalf("with a stale count a new stream was refused: %v", err)
	}
}

// Over its target, a replica sheds its excess: delta streams first, at
// random, each ended with UNAVAILABLE; the rest stay served. A stale count
// sheds nothing.
func TestBalanceShedsDeltaStreamsFirst(t *testing.T) {
	load := &shardLoad{}
	counts := &balanceCounts{}
	srv := xdstest.Start(t, xds.Options{Balance: &xds.Balance{Load: load.get, Report: counts, ShedRate: 100}})
	srv.Publish(t, base()...)
	var sotw []*xdstest.Stream
	var delta []*xdstest.DeltaStream
	for i := range 6 {
		s, err := openSotW(t, srv, fmt.Sprintf("sotw-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sotw = append(sotw, s)
		d := xdstest.OpenDeltaADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node(fmt.Sprintf("delta-%d", i)))
		d.Subscribe(cds)
		d.RecvType(cds)
		delta = append(delta, d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.XDS.Balance(ctx) }()
	defer func() { cancel(); <-done }()

	// Stale: 12 streams here and the fleet said to be 12 on 2 replicas,
	// but not read lately: nothing is shed.
	load.set(guard.Load{Replicas: 2, Streams: 12})
	counts.waitLooks(t, 2)
	if n := counts.shedDelta.Load() + counts.shedSotW.Load(); n != 0 {
		t.Fatalf("a stale count shed %d streams", n)
	}

	// Fresh: a target of 8 (the mean, 6, plus the slack): 4 go, all delta.
	load.set(guard.Load{Replicas: 2, Streams: 12, Fresh: true})
	deadline := time.Now().Add(xdstest.Timeout)
	for counts.shedDelta.Load()+counts.shedSotW.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams shed within %v, want 4", counts.shedDelta.Load()+counts.shedSotW.Load(), xdstest.Timeout)
		}
		time.Sleep(10 * time.Millisecond) // polling the counter the shedding loop bumps
	}
	var ended []int
	for len(ended) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("delta streams %v ended within %v, want 4", ended, xdstest.Timeout)
		}
		ended = ended[:0]
		for i, d := range delta {
			if done, err := d.Ended(); done {
				ended = append(ended, i)
				if grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(grpcstatus.Convert(err).Message(), "over its share") {
					t.Fatalf("delta stream %d ended with %v, want UNAVAILABLE saying the replica is over its share", i, err)
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // polling the clients' streams
	}
	// Two more looks at the load: nothing more goes once at the target.
	counts.waitLooks(t, 2)
	if d, s := counts.shedDelta.Load(), counts.shedSotW.Load(); d != 4 || s != 0 {
		t.Fatalf("shed %d delta and %d state-of-the-world streams, want the 4 over the target, all delta (6 were open)", d, s)
	}
	if got := counts.target.Load(); got != 8 {
		t.Errorf("target reported %d, want 8", got)
	}
	for _, s := range sotw {
		alive(t, s)
	}
}

// Balancing moves clients, not streams: a stream on a connection that has
// another is taken over the target (its client is here already; refusing
// one of an Envoy's per-type streams would leave it half configured), and
// shedding ends a connection's streams together.
func TestBalanceKeepsAConnectionsStreamsTogether(t *testing.T) {
	load := &shardLoad{}
	counts := &balanceCounts{}
	srv := xdstest.Start(t, xds.Options{Balance: &xds.Balance{Load: load.get, Report: counts, ShedRate: 100}})
	srv.Publish(t, base()...)
	reg := srv.Registry
	// A delta client's two per-type streams on one connection, a SotW
	// client's two ADS streams on another.
	dconn := xdstest.Dial(t, srv.Addr)
	var deltas []*xdstest.DeltaStream
	for _, url := range []string{cds, eds} {
		d := xdstest.OpenDeltaType(t, dconn, reg.Lookup(url), xdstest.Node("delta-envoy"))
		d.Subscribe(url, map[string][]string{cds: nil, eds: {"a"}}[url]...)
		d.RecvType(url)
		deltas = append(deltas, d)
	}
	sconn := xdstest.Dial(t, srv.Addr)
	var sotws []*xdstest.Stream
	for range 2 {
		s := xdstest.OpenADS(t, sconn, xdstest.Node("sotw-envoy"))
		s.Request(cds)
		s.RecvType(cds)
		sotws = append(sotws, s)
	}
	// 2 streams on 2 replicas: a target of 3 (the mean, 1, plus the
	// slack). A new client is refused; another stream of one here is not.
	load.set(guard.Load{Replicas: 2, Streams: 2, Fresh: true})
	if _, err := openSotW(t, srv, "new-envoy"); grpcstatus.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a new client over the target: %v, want RESOURCE_EXHAUSTED", err)
	}
	third := xdstest.OpenType(t, sconn, reg.Lookup(lds), xdstest.Node("sotw-envoy"))
	third.Request(lds)
	third.RecvType(lds)

	// 5 streams, 1 over a target of 4: the delta connection goes, both
	// its streams.
	load.set(guard.Load{Replicas: 2, Streams: 4, Fresh: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.XDS.Balance(ctx) }()
	defer func() { cancel(); <-done }()
	for i, d := range deltas {
		if err := d.Err(); grpcstatus.Code(err) != codes.Unavailable {
			t.Fatalf("delta stream %d ended with %v, want UNAVAILABLE (shed)", i, err)
		}
	}
	counts.waitLooks(t, 2)
	if d, s := counts.shedDelta.Load(), counts.shedSotW.Load(); d != 2 || s != 0 {
		t.Fatalf("shed %d delta and %d state-of-the-world streams, want the delta connection's 2", d, s)
	}
	for _, s := range sotws {
		alive(t, s)
	}
	if ended, err := third.Ended(); ended {
		t.Errorf("the SotW client's per-type stream ended: %v", err)
	}
}

// Only streams that identified themselves count towards a replica's load:
// streams opened and left silent (no request, so no node, admission or
// new-streams-a-second turn) must not make a replica refuse or shed the
// fleet's real proxies.
func TestBalanceCountsOnlyIdentifiedStreams(t *testing.T) {
	load := &shardLoad{}
	// 4 streams on 2 replicas: a target of 4.
	load.set(guard.Load{Replicas: 2, Streams: 4, Fresh: true})
	srv := xdstest.Start(t, xds.Options{Balance: &xds.Balance{Load: load.get}})
	srv.Publish(t, base()...)
	for i := range 10 {
		xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node(fmt.Sprintf("silent-%d", i)))
	}
	for i := range 4 {
		if _, err := openSotW(t, srv, fmt.Sprintf("proxy-%d", i)); err != nil {
			t.Fatalf("proxy %d of a target of 4, with 10 silent streams open: %v", i, err)
		}
	}
	s, err := openSotW(t, srv, "over")
	if err == nil {
		err = s.Err()
	}
	if grpcstatus.Code(err) != codes.ResourceExhausted || !strings.Contains(grpcstatus.Convert(err).Message(), "4 streams, target 4") {
		t.Fatalf("the fifth proxy ended with %v, want RESOURCE_EXHAUSTED counting the 4 identified streams", err)
	}
}
