package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
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
