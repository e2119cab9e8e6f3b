package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// routingBackend answers UnaryCall with its id, unless the RPC's metadata
// asks it to misbehave: x-fail-first: N fails the first N attempts of the
// RPC named by x-rpc-id with UNAVAILABLE; x-hang blocks until the RPC's
// deadline.
type routingBackend struct {
	testgrpc.UnimplementedTestServiceServer
	id       string
	mu       sync.Mutex
	attempts map[string]int
}

func (b *routingBackend) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-fail-first"); len(v) > 0 {
		n, _ := strconv.Atoi(v[0])
		b.mu.Lock()
		b.attempts[fmt.Sprint(md.Get("x-rpc-id"))]++
		k := b.attempts[fmt.Sprint(md.Get("x-rpc-id"))]
		b.mu.Unlock()
		if k <= n {
			return nil, status.Error(codes.Unavailable, "failing this attempt on purpose")
		}
	}
	if len(md.Get("x-hang")) > 0 {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

// startRoutingBackends starts n routingBackends on loopback.
func startRoutingBackends(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, &routingBackend{id: fmt.Sprintf("backend-%d", i), attempts: map[string]int{}})
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// routedConfig is the model's xds:///greeter with routes: v1 on backend-0,
// v2 on backend-1, admin on backend-2.
func routedConfig(ports []int) string {
	return fmt.Sprintf(`services:
- { name: v1, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
- { name: v2, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
- { name: admin, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
grpc:
- target: greeter
  routes:
  # Another method: never takes UnaryCall.
  - match: { path: /grpc.testing.TestService/StreamingOutputCall }
    to: [{ service: admin }]
  # Written with capitals: metadata keys are lowercase.
  - match: { prefix: /grpc.testing.TestService/Unary, headers: [{ name: X-User-Group, exact: beta }] }
    to: [{ service: v2 }]
  - match: { regex: "/grpc\\.testing\\.TestService/Unary.*", headers: [{ name: x-tenant, regex: "t-[0-9]+" }] }
    to: [{ service: admin }]
  - match: { headers: [{ name: x-flaky, present: true }] }
    to: [{ service: v2 }]
    retries: { on: [unavailable], num_retries: 2, base_interval: 1ms, max_interval: 5ms }
  - match: { headers: [{ name: x-hang, present: true }] }
    to: [{ service: v2 }]
    timeout: 200ms
  - match: { headers: [{ name: x-region, prefix: eu- }] }
    to: [{ service: v1, weight: 1 }, { service: admin, weight: 1 }]
  to: [{ service: v1 }]
`, ports[0], ports[1], ports[2])
}

// TestGRPCRoutesFromModel: grpc-go's xDS client routes by the model's
// method path, metadata (exact, prefix, regex, present), per-route timeout,
// retry policy and weighted split, as docs/config.md says.
func TestGRPCRoutesFromModel(t *testing.T) {
	ports := startRoutingBackends(t, 3)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, routedConfig(ports))
	p := startPylon(t, cfg)
	client := p.grpcClient(t, "routes-client")

	var rpcID atomic.Int64
	call := func(kv ...string) (string, codes.Code) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		kv = append(kv, "x-rpc-id", strconv.FormatInt(rpcID.Add(1), 10))
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		return resp.GetServerId(), status.Code(err)
	}
	want := func(name, wantID string, wantCode codes.Code, kv ...string) {
		t.Helper()
		if id, code := call(kv...); id != wantID || code != wantCode {
			t.Errorf("%s: reached %q with %v, want %q with %v", name, id, code, wantID, wantCode)
		}
	}

	want("no metadata: the target's to", "backend-0", codes.OK)
	want("x-user-group: beta (exact)", "backend-1", codes.OK, "x-user-group", "beta")
	want("x-user-group: Beta (exact is case-sensitive)", "backend-0", codes.OK, "x-user-group", "Beta")
	want("x-tenant: t-42 (path regex and header regex)", "backend-2", codes.OK, "x-tenant", "t-42")
	want("x-tenant: t-x (header regex matches the whole value)", "backend-0", codes.OK, "x-tenant", "t-x")
	want("x-tenant: xt-42 (no partial match)", "backend-0", codes.OK, "x-tenant", "xt-42")

	// Retries: two retries on UNAVAILABLE; three failures exhaust them; the
	// default route has no retry policy.
	want("x-flaky, 2 failures (retried twice)", "backend-1", codes.OK, "x-flaky", "1", "x-fail-first", "2")
	want("x-flaky, 3 failures (num_retries 2)", "", codes.Unavailable, "x-flaky", "1", "x-fail-first", "3")
	want("1 failure on the default route (no retries)", "", codes.Unavailable, "x-fail-first", "1")

	// Timeout: the route's 200ms caps the RPC's 5s deadline.
	start := time.Now()
	want("x-hang (timeout 200ms)", "", codes.DeadlineExceeded, "x-hang", "1")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("x-hang took %v: the route's timeout did not cap the deadline", d)
	}

	// Split 1:1: both services take some of 200 RPCs (each misses all with
	// probability 2^-200).
	seen := map[string]int{}
	for range 200 {
		id, code := call("x-region", "eu-west")
		if code != codes.OK {
			t.Fatalf("x-region: eu-west: %v", code)
		}
		seen[id]++
	}
	if seen["backend-0"] == 0 || seen["backend-2"] == 0 || len(seen) != 2 {
		t.Errorf("x-region: eu-west (1:1 split of v1 and admin): reached %v", seen)
	}
}
