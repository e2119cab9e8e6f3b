package integration

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// layout routes xds:///greeter to one cluster, named color, holding the
// given backends; the other color's cluster is not in the config at all.
func layout(color string, ports []int) string { return grpcConfig(color, color, ports) }

// TestGRPCClientFlipsWithoutFailures flips the config between two layouts,
// each retiring the other's cluster, while RPCs flow without pause: none may
// fail for want of a cluster. A server that removed the old cluster before
// the client stopped routing to it fails RPCs here by the thousand with
// `resource "blue" of type "ClusterResource" has been removed` (seen by
// disabling Pylon's removal hold).
//
// One failure is not the server's: grpc-go installs a new route's config
// selector a moment before its cluster manager's picker knows the new
// cluster, and RPCs picked in that window fail with "unknown cluster
// selected for RPC" whatever the control plane does (the client already
// holds the cluster: its dependency manager waits for it before switching).
// grpc-java fixed the same race in its PR #11947. Those are counted and
// logged, not failed on.
func TestGRPCClientFlipsWithoutFailures(t *testing.T) {
	ports := startBackends(t, 3)
	blue, green := ports[:2], ports[2:]
	owner := map[string]string{"backend-0": "blue", "backend-1": "blue", "backend-2": "green"}
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, layout("blue", blue))
	p := startPylon(t, cfg)

	client := p.grpcClient(t, "flipper")
	// Wait for the first layout with a wait-for-ready RPC; from then on
	// RPCs are fail-fast, as an application's would be.
	client.call(t)

	var (
		stop     atomic.Bool
		calls    atomic.Int64
		races    atomic.Int64
		failures []string
		mu       sync.Mutex
		current  atomic.Value // the color the last RPC reached
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200000 && !stop.Load(); i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			cancel()
			calls.Add(1)
			if err != nil {
				if strings.Contains(err.Error(), "unknown cluster selected for RPC") {
					races.Add(1)
					continue
				}
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				continue
			}
			current.Store(owner[resp.GetServerId()])
		}
	}()

	colors := []string{"green", "blue"}
	for flip := range 10 {
		color := colors[flip%2]
		backends := map[string][]int{"blue": blue, "green": green}[color]
		writeAtomically(t, cfg, layout(color, backends))
		if !eventually(func() bool { return current.Load() == color }) {
			t.Fatalf("flip %d: RPCs never reached %s", flip, color)
		}
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d of %d RPCs failed across 10 flips; first: %s", len(failures), calls.Load(), failures[0])
	}
	t.Logf("%d RPCs across 10 flips: none failed for a missing cluster; %d hit grpc-go's selector/picker race", calls.Load(), races.Load())
}
