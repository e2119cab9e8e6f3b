package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

// held is a backend whose RPCs wait until released, counting those in
// flight.
type held struct {
	testgrpc.UnimplementedTestServiceServer
	mu       sync.Mutex
	inFlight int
	changed  chan struct{} // closed and replaced on every change of inFlight
	release  chan struct{}
}

func (h *held) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	h.add(1)
	defer h.add(-1)
	select {
	case <-h.release:
		return &testgrpc.SimpleResponse{ServerId: "held"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *held) add(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight += n
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitInFlight waits until n RPCs are in flight, within bound.
func (h *held) waitInFlight(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(bound)
	for {
		h.mu.Lock()
		got, changed := h.inFlight, h.changed
		h.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d RPCs in flight, want %d", got, n)
		}
	}
}

// startHeld starts a held backend on loopback and returns it with its port.
func startHeld(t *testing.T) (*held, int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &held{changed: make(chan struct{}), release: make(chan struct{})}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return h, lis.Addr().(*net.TCPAddr).Port
}

// TestGRPCCircuitBreakerCapsConcurrentRPCs (gRFC A32): a service's
// circuit_breakers.max_requests reaches grpc-go as the cluster's
// max_requests, and an RPC over it fails at once with UNAVAILABLE while
// the others are in flight; once they end, RPCs pass again.
func TestGRPCCircuitBreakerCapsConcurrentRPCs(t *testing.T) {
	backend, port := startHeld(t)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  circuit_breakers: { max_requests: 2 }
  endpoints: [{ address: 127.0.0.1, port: %d }]
grpc:
- target: greeter
  to: [{ service: greeter }]
`, port))
	p := startPylon(t, cfg)
	client := p.grpcClient(t, "breaker-client")

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
			errs <- err
		}()
	}
	backend.waitInFlight(t, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("a third RPC with 2 in flight and max_requests 2: %v, want UNAVAILABLE", err)
	}
	t.Logf("over the limit: %v", err)

	close(backend.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("an RPC under the limit failed: %v", err)
		}
	}
	if got := client.call(t); got != "held" {
		t.Fatalf("after the others ended: answered by %q", got)
	}
}

// flaky is a backend that fails every RPC with INTERNAL while failing is
// set.
type flaky struct {
	testgrpc.UnimplementedTestServiceServer
	id      string
	failing atomic.Bool
}

func (f *flaky) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if f.failing.Load() {
		return nil, grpcstatus.Error(codes.Internal, f.id+" is failing")
	}
	return &testgrpc.SimpleResponse{ServerId: f.id}, nil
}

// startFlaky starts n flaky backends, backend-0 to backend-n-1, on
// loopback, none failing.
func startFlaky(t *testing.T, n int) ([]*flaky, []int) {
	t.Helper()
	var backends []*flaky
	var ports []int
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f := &flaky{id: fmt.Sprintf("backend-%d", i)}
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, f)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		backends, ports = append(backends, f), append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return backends, ports
}

// TestGRPCOutlierDetectionEjectsAFailingBackend (gRFC A50): a service's
// outlier_detection.failure_percentage reaches grpc-go, which ejects the
// backend failing every RPC, so RPCs stop failing; when the backend
// recovers, it is brought back after the ejection time.
func TestGRPCOutlierDetectionEjectsAFailingBackend(t *testing.T) {
	backends, ports := startFlaky(t, 3)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  outlier_detection:
    interval: 100ms
    base_ejection_time: 300ms
    max_ejection_percent: 50
    failure_percentage: { threshold: 50, minimum_hosts: 3, request_volume: 5 }
  endpoints:
  - { address: 127.0.0.1, port: %d }
  - { address: 127.0.0.1, port: %d }
  - { address: 127.0.0.1, port: %d }
grpc:
- target: greeter
  to: [{ service: greeter }]
`, ports[0], ports[1], ports[2]))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("the config was refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "outlier-client")
	client.call(t) // the client has its configuration

	// try makes an RPC and returns the backend that answered, "" if it
	// failed.
	try := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if err != nil {
			return ""
		}
		return resp.GetServerId()
	}
	backends[2].failing.Store(true)
	// Round robin without ejection sends every third RPC to backend-2, so
	// 30 RPCs in a row that succeed say it is out.
	if !eventually(func() bool {
		for range 30 {
			if try() == "" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("RPCs kept failing: the failing backend was not ejected")
	}

	backends[2].failing.Store(false)
	if !eventually(func() bool { return try() == "backend-2" }) {
		t.Fatal("the recovered backend was not brought back")
	}
}

// ringConfig is xds:///greeter over a ring_hash service of the backends
// at ports, hashing RPCs on x-user.
func ringConfig(ports []int) string {
	var eps strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&eps, "  - { address: 127.0.0.1, port: %d }\n", p)
	}
	return fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  lb: ring_hash
  endpoints:
%sgrpc:
- target: greeter
  hash: { header: x-user }
  to: [{ service: greeter }]
`, eps.String())
}

// TestGRPCRingHashKeepsAHeadersRPCsOnOneBackend (gRFC A42): a target's
// hash on a header reaches grpc-go as the route's hash policy over a
// ring_hash service: every RPC of one x-user value lands on one backend,
// the users spread over the backends, and when a backend leaves, its users
// move and few of the others do.
func TestGRPCRingHashKeepsAHeadersRPCsOnOneBackend(t *testing.T) {
	ports := startBackends(t, 3)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, ringConfig(ports))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("the config was refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "ring-client")
	as := func(user string) string {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-user", user), 5*time.Second)
		defer cancel()
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("RPC as %s: %v", user, err)
		}
		return resp.GetServerId()
	}
	// A ring hash client connects to a backend when a hash first picks
	// it; the first RPCs of a user may land on the next connected one
	// (gRFC A42's picker), so each user's backend is read once all three
	// are connected.
	for i := range 60 {
		as(fmt.Sprintf("warm-%d", i))
	}
	home := map[string]string{}
	spread := map[string]int{}
	for i := range 60 {
		user := fmt.Sprintf("user-%d", i)
		home[user] = as(user)
		spread[home[user]]++
		for range 5 {
			if got := as(user); got != home[user] {
				t.Fatalf("%s's RPCs reached %s and %s", user, home[user], got)
			}
		}
	}
	if len(spread) < 3 {
		t.Fatalf("60 users on %v: the header is not hashed", spread)
	}

	// backend-2 leaves: its users move; of the others, only those whose
	// point on the ring the two remaining backends' new points take (about
	// a sixth: each backend's share of the ring grows from 1/3 to 1/2),
	// not the two thirds a hash modulo the backends would move.
	writeAtomically(t, cfg, ringConfig(ports[:2]))
	if !eventually(func() bool {
		for user, h := range home {
			if h == "backend-2" && as(user) == "backend-2" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("backend-2's users still reach it after it left")
	}
	stayed, moved := 0, 0
	for user, h := range home {
		if h == "backend-2" {
			continue
		}
		if as(user) == h {
			stayed++
		} else {
			moved++
		}
	}
	if moved*100 > (stayed+moved)*35 {
		t.Fatalf("%d of the %d users of the remaining backends moved, want under 35%%", moved, stayed+moved)
	}
	t.Logf("users per backend %v; after backend-2 left, %d of the others moved, %d stayed", spread, moved, stayed)
}

// TestGRPCFaultInjectionAbortsTheConfiguredShare (gRFC A33): a target's
// fault aborts its share of RPCs with the configured status, and a route's
// own fault delays every RPC it takes.
func TestGRPCFaultInjectionAbortsTheConfiguredShare(t *testing.T) {
	ports := startBackends(t, 1)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- { name: greeter, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
grpc:
- target: greeter
  fault: { abort: { status: resource-exhausted, percent: 30 } }
  routes:
  - match: { headers: [{ name: x-slow, present: true }] }
    to: [{ service: greeter }]
    fault: { delay: { delay: 300ms } }
  to: [{ service: greeter }]
`, ports[0]))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("the config was refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "fault-client")
	rpc := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		return err
	}
	// The share of aborts is binomial: 0.07 is over four standard
	// deviations at n = 800.
	const n = 800
	aborted := 0
	for range n {
		switch err := rpc(context.Background()); grpcstatus.Code(err) {
		case codes.OK:
		case codes.ResourceExhausted:
			aborted++
		default:
			t.Fatalf("RPC: %v, want OK or RESOURCE_EXHAUSTED", err)
		}
	}
	if share := float64(aborted) / n; share < 0.23 || share > 0.37 {
		t.Fatalf("%d of %d RPCs aborted (%.3f), want 0.30 ± 0.07", aborted, n, share)
	}

	// The x-slow route has a fault of its own: every RPC delayed, none
	// aborted (a route's fault replaces the target's).
	slow := metadata.AppendToOutgoingContext(context.Background(), "x-slow", "1")
	for range 3 {
		start := time.Now()
		if err := rpc(slow); err != nil {
			t.Fatalf("delayed RPC: %v", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("an x-slow RPC took %v, want at least the 300ms delay", d)
		}
	}
}
