package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
)

// loaded is a backend that reports its load with each response (ORCA
// per-call metrics): a fixed CPU utilization at 100 queries a second.
type loaded struct {
	testgrpc.UnimplementedTestServiceServer
	id  string
	cpu float64
}

func (b *loaded) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	r := orca.CallMetricsRecorderFromContext(ctx)
	r.SetCPUUtilization(b.cpu)
	r.SetQPS(100)
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

// startLoaded starts a backend per CPU utilization on loopback and
// returns their ports.
func startLoaded(t *testing.T, cpus ...float64) []int {
	t.Helper()
	var ports []int
	for i, cpu := range cpus {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(orca.CallMetricsServerOption(nil))
		testgrpc.RegisterTestServiceServer(s, &loaded{id: fmt.Sprintf("backend-%d", i), cpu: cpu})
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// TestGRPCWeightedRoundRobinFollowsReportedLoad (gRFC A58): lb:
// weighted_round_robin, with its knobs, reaches grpc-go as
// client_side_weighted_round_robin; backends reporting their load over
// ORCA are weighted by queries per utilization, so the one at 20% CPU
// takes about four RPCs for each of the one at 80% (round robin: one).
func TestGRPCWeightedRoundRobinFollowsReportedLoad(t *testing.T) {
	ports := startLoaded(t, 0.2, 0.8)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  lb: weighted_round_robin
  weighted_round_robin: { blackout_period: 1ms, weight_update_period: 100ms, weight_expiration_period: 1m, error_utilization_penalty: 1 }
  endpoints:
  - { address: 127.0.0.1, port: %d }
  - { address: 127.0.0.1, port: %d }
grpc:
- target: greeter
  to: [{ service: greeter }]
`, ports[0], ports[1]))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "wrr-client")
	share := func(n int) int {
		got := 0
		for range n {
			if client.call(t) == "backend-0" {
				got++
			}
		}
		return got * 100 / n
	}
	// Weights apply once both backends have reported and an update period
	// has passed; a balancer rebuilt by a later update (the config file's
	// watch can fire twice) starts its weights over. Round robin gives
	// 50% however long it runs.
	last := 0
	if !eventually(func() bool { last = share(400); return last >= 70 && last <= 90 }) {
		t.Fatalf("backend-0 (20%% CPU) took %d%% of the last 400 RPCs, want about 80%%: weighted round robin did not follow the reported load", last)
	}
}
