package integration

import (
	"fmt"
	"path/filepath"
	"testing"
)

// lbConfig is xds:///greeter over three backends balanced by lb, the
// first two in zone-a and the third in zone-b.
func lbConfig(lb string, ports []int) string {
	return fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  lb: %s
  endpoints:
  - { address: 127.0.0.1, port: %d, zone: zone-a }
  - { address: 127.0.0.1, port: %d, zone: zone-a }
  - { address: 127.0.0.1, port: %d, zone: zone-b }
grpc:
- target: greeter
  to: [{ service: greeter }]
`, lb, ports[0], ports[1], ports[2])
}

// TestGRPCPickFirstSendsEveryRPCToTheFirstBackend (gRFC A62): a service's
// lb: pick_first reaches grpc-go as the Cluster's load_balancing_policy,
// and every RPC goes to the first endpoint of the assignment.
func TestGRPCPickFirstSendsEveryRPCToTheFirstBackend(t *testing.T) {
	ports := startBackends(t, 3)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, lbConfig("pick_first", ports))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "pick-first-client")
	seen := map[string]int{}
	for range 30 {
		seen[client.call(t)]++
	}
	if len(seen) != 1 || seen["backend-0"] != 30 {
		t.Fatalf("30 RPCs reached %v, want all on backend-0", seen)
	}
}

// TestGRPCWRRLocalitySplitsByLocalityThenRoundRobin (gRFC A52): lb:
// wrr_locality, with round robin inside each locality, gives each of the
// two equally weighted localities half the RPCs: the lone backend of
// zone-b half, each of zone-a's a quarter.
func TestGRPCWRRLocalitySplitsByLocalityThenRoundRobin(t *testing.T) {
	ports := startBackends(t, 3)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, lbConfig("wrr_locality", ports))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "wrr-locality-client")
	// Until every backend is connected the pickers skip some: warm up.
	seen := map[string]int{}
	if !eventually(func() bool { seen[client.call(t)]++; return len(seen) == 3 }) {
		t.Fatalf("RPCs reached %v, want all 3 backends", seen)
	}
	seen = map[string]int{}
	const n = 400
	for range n {
		seen[client.call(t)]++
	}
	// The weighted round robin over localities is deterministic up to
	// its start; allow a tenth either way.
	for id, want := range map[string]int{"backend-0": n / 4, "backend-1": n / 4, "backend-2": n / 2} {
		if got := seen[id]; got < want-n/10 || got > want+n/10 {
			t.Errorf("%s took %d of %d RPCs, want about %d (%v)", id, got, n, want, seen)
		}
	}
}
