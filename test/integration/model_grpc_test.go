package integration

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// split is the model config of xds:///greeter over two services, v1 on
// backend-0 and v2 on backend-1, with the given weights.
func split(ports []int, v1, v2 int) string {
	return fmt.Sprintf(`services:
- { name: greeter-v1, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
- { name: greeter-v2, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
grpc:
- target: greeter
  to: [{ service: greeter-v1, weight: %d }, { service: greeter-v2, weight: %d }]
`, ports[0], ports[1], v1, v2)
}

// TestGRPCCanarySplitFromModel: the model's weighted split reaches grpc-go's
// xDS client as written, then shifts wholly to v2.
func TestGRPCCanarySplitFromModel(t *testing.T) {
	ports := startBackends(t, 2)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, split(ports, 80, 20))
	p := startPylon(t, cfg)

	client := p.grpcClient(t, "canary-client")
	call := func() string { return client.call(t) }

	// 80/20: gRPC picks a cluster per RPC at random by weight, so over
	// n RPCs v1's share is binomial; 0.06 is more than four standard
	// deviations at n = 1000.
	const n = 1000
	v1 := 0
	for range n {
		if call() == "backend-0" {
			v1++
		}
	}
	if share := float64(v1) / n; math.Abs(share-0.8) > 0.06 {
		t.Fatalf("v1 took %.3f of %d RPCs, want 0.80 ± 0.06", share, n)
	}

	// 0/100: every RPC to v2.
	writeAtomically(t, cfg, split(ports, 0, 100))
	if !eventually(func() bool { return onlyTo(call, "backend-1", 50) }) {
		t.Fatal("the shift to v2 did not take")
	}
	if !onlyTo(call, "backend-1", 200) {
		t.Fatal("an RPC reached v1 after the shift to 0/100")
	}
}
