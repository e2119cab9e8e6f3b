package interop

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// featureClients are the clients the feature tests run, by the name a
// group's `clients:` gives them.
var featureClients = []struct {
	name  string
	start func(t *testing.T, bootstrapPath string, bootstrapJSON []byte) client
}{
	{"grpc-go", func(t *testing.T, _ string, js []byte) client { return startGoClient(t, js) }},
	{"grpc-core", func(t *testing.T, path string, _ []byte) client {
		return startSubprocess(t, path, python(t), "client.py", "xds:///greeter")
	}},
	{"grpc-js", func(t *testing.T, path string, _ []byte) client {
		return startSubprocess(t, path, nodeJS(t), "client.js", "xds:///greeter")
	}},
}

// startSwitchable starts n backends like startBackends whose RPCs fail
// with INTERNAL while their switch is on.
func startSwitchable(t *testing.T, n int) ([]int, []*atomic.Bool) {
	t.Helper()
	var ports []int
	var failing []*atomic.Bool
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id, fail := fmt.Sprintf("backend-%d", i), &atomic.Bool{}
		s := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
				return err
			}
			if fail.Load() {
				return status.Error(codes.Internal, id+" is failing")
			}
			return stream.SendMsg(wrapperspb.String(id))
		}))
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		ports, failing = append(ports, lis.Addr().(*net.TCPAddr).Port), append(failing, fail)
	}
	return ports, failing
}

// featureConfig is xds:///greeter over one service of three backends,
// with the service's and the target's extra lines, for a group of the
// client (which states it, so that every resource is checked against
// what the client accepts).
func featureConfig(client string, ports []int, service, target string) string {
	return fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %d }, { address: 127.0.0.1, port: %d }, { address: 127.0.0.1, port: %d }]
%s
groups:
- name: interop
  match: { metadata: { client: %q }, region: interop, zone: zone-a }
  clients: [%s]
grpc:
- target: greeter
  to: [{ service: greeter }]
%s
`, ports[0], ports[1], ports[2], service, client, client, target)
}

// TestClientsRingHashKeepsAHeadersRPCsOnOneBackend (gRFC A42) with each
// client: RPCs with one x-user value land on one backend, and users spread.
func TestClientsRingHashKeepsAHeadersRPCsOnOneBackend(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "grpc-core" {
				t.Skip("C-core 1.51.1 serves no RPC over RING_HASH: Pylon refuses it for grpc-core groups (rule cluster-ring-hash-core), as TestClientsRejectWhatTheirGroupRefuses/grpc-core/RING_HASH shows")
			}
			t.Parallel()
			ports := startBackends(t, 3)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, featureConfig(c.name, ports, "  lb: ring_hash", "  hash: { header: x-user }"))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			as := func(user string) string {
				got, err := cl.call(method, map[string]string{"x-user": user})
				if err != nil {
					t.Fatalf("RPC as %s: %v", user, err)
				}
				return got
			}
			// A ring hash client connects to a backend when a hash first
			// picks it, and meanwhile picks the next connected one.
			for i := range 30 {
				as(fmt.Sprintf("warm-%d", i))
			}
			spread := map[string]bool{}
			for i := range 12 {
				user := fmt.Sprintf("user-%d", i)
				first := as(user)
				spread[first] = true
				for range 4 {
					if got := as(user); got != first {
						t.Fatalf("%s's RPCs reached %s and %s", user, first, got)
					}
				}
			}
			if len(spread) < 2 {
				t.Fatalf("12 users all on %v: the header is not hashed", spread)
			}
		})
	}
}

// TestClientsOutlierDetectionEjectsAFailingBackend (gRFC A50) with each
// client: the backend failing every RPC is ejected by failure percentage,
// so RPCs stop failing, and comes back once it recovers.
func TestClientsOutlierDetectionEjectsAFailingBackend(t *testing.T) {
	const outlier = `  outlier_detection:
    interval: 100ms
    base_ejection_time: 300ms
    max_ejection_percent: 50
    failure_percentage: { threshold: 50, minimum_hosts: 3, request_volume: 5 }`
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports, failing := startSwitchable(t, 3)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, featureConfig(c.name, ports, outlier, ""))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			if _, err := cl.call(method, nil); err != nil {
				t.Fatalf("first RPC: %v", err)
			}
			failing[2].Store(true)
			// Round robin without ejection sends every third RPC to
			// backend-2: 30 in a row that succeed say it is out.
			if !within(func() bool {
				for range 30 {
					if _, err := cl.call(method, nil); err != nil {
						return false
					}
				}
				return true
			}) {
				t.Fatal("RPCs kept failing: the failing backend was not ejected")
			}
			failing[2].Store(false)
			if !within(func() bool { got, err := cl.call(method, nil); return err == nil && got == "backend-2" }) {
				t.Fatal("the recovered backend was not brought back")
			}
		})
	}
}

// within tries cond until it holds, within bound (each try makes RPCs,
// which pace it).
func within(cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
	}
	return false
}

// TestClientsFaultInjectionAbortsTheConfiguredShare (gRFC A33) with each
// client: half the RPCs fail with the configured RESOURCE_EXHAUSTED, the
// others reach the backend.
func TestClientsFaultInjectionAbortsTheConfiguredShare(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports := startBackends(t, 3)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, featureConfig(c.name, ports, "", "  fault: { abort: { status: resource-exhausted, percent: 50 } }"))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			// Binomial at n = 200: 0.15 is over four standard deviations.
			const n = 200
			aborted := 0
			for range n {
				_, err := cl.call(method, nil)
				switch {
				case err == nil:
				case status.Code(err) == codes.ResourceExhausted || strings.Contains(err.Error(), "RESOURCE_EXHAUSTED"):
					aborted++
				default:
					t.Fatalf("RPC: %v, want OK or RESOURCE_EXHAUSTED", err)
				}
			}
			if share := float64(aborted) / n; share < 0.35 || share > 0.65 {
				t.Fatalf("%d of %d RPCs aborted (%.2f), want 0.50 ± 0.15", aborted, n, share)
			}
			t.Logf("%s: %d of %d RPCs aborted", c.name, aborted, n)
		})
	}
}
