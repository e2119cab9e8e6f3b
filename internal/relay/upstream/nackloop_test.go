package upstream_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/relay/upstream"
)

// hostile answers every request, a NACK included, with a response of a
// type nobody subscribed to, whose type_url is 10 KB long, at one version.
type hostile struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	mu    sync.Mutex
	nacks []time.Time
}

func (h *hostile) DeltaAggregatedResources(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	bad := "type.googleapis.com/" + strings.Repeat("x", 10000)
	for n := 0; ; n++ {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		if req.GetErrorDetail() != nil {
			h.mu.Lock()
			h.nacks = append(h.nacks, time.Now())
			h.mu.Unlock()
		}
		if err := s.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: bad, SystemVersionInfo: "v1", Nonce: string(rune('a' + n%26))}); err != nil {
			return nil
		}
	}
}

func (h *hostile) nacked() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.nacks...)
}

// logs keeps the records a logger writes.
type logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// TestRepeatedRefusedResponsesAreNACKedWithBackoffAndLoggedOnce: an
// upstream that answers every NACK with the same bad response gets its
// NACKs at a backed-off rate, not as fast as the wire goes; the relay
// warns once for the version, and what it logs of the type_url is
// bounded.
func TestRepeatedRefusedResponsesAreNACKedWithBackoffAndLoggedOnce(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	h := &hostile{}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, h)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	rec := &logs{}
	start := time.Now()
	run(t, upstream.Options{Addrs: []string{lis.Addr().String()}, Logger: slog.New(rec)})
	if !eventually(func() bool { return len(h.nacked()) >= 6 }) {
		t.Fatalf("the upstream saw %d NACKs, want 6", len(h.nacked()))
	}
	// Backoff from 10ms doubling to 50ms: 10+20+40+50 at least between
	// the first NACK and the fifth after it, at most one at once.
	n := h.nacked()
	if gap := n[5].Sub(n[0]); gap < 100*time.Millisecond {
		t.Errorf("6 NACKs of one bad response in %v (%d NACKs in %v since start): no backoff", gap, len(h.nacked()), time.Since(start))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	warns := 0
	for _, r := range rec.recs {
		if r.Level >= slog.LevelWarn && strings.Contains(r.Message, "refused") {
			warns++
		}
		r.Attrs(func(a slog.Attr) bool {
			if s := a.Value.String(); len(s) > 1024 {
				t.Errorf("log %q: %s is %d bytes", r.Message, a.Key, len(s))
			}
			return true
		})
	}
	if warns != 1 {
		t.Errorf("%d warnings of refused responses, all of version v1; want 1", warns)
	}
}
