package main

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Asked for -delta, the driver's fleet speaks delta to every server, so
// that each variant is compared with go-control-plane's same variant; in
// the failover scenario to Pylon only.
func TestDeltaFleetSpeaksDeltaToEveryServer(t *testing.T) {
	for _, c := range []struct {
		impl            string
		delta, failover bool
		want            bool
	}{
		{"pylon", true, false, true},
		{"pylon-api@/tmp/fleet.old", true, false, true},
		{"gcp", true, false, true},
		{"gcp", false, false, false},
		{"pylon", false, false, false},
		{"pylon", true, true, true},
		{"gcp", true, true, false}, // the failover's SYNCED watch reads SotW callbacks only
	} {
		if got := speaksDelta(c.impl, c.delta, c.failover); got != c.want {
			t.Errorf("speaksDelta(%q, %t, %t) = %t, want %t", c.impl, c.delta, c.failover, got, c.want)
		}
	}
}

// go-control-plane's server, as the fleet scenario (ADS cache) and the
// churn scenario (non-ADS cache) run it, brings the simulator's delta
// proxies to their full config on loopback and then sends an EDS change
// as a delta: the one assignment that changed, not all of them.
func TestGCPServesDeltaProxies(t *testing.T) {
	const n, clusters = 20, 5
	for _, adsCache := range []bool{true, false} {
		t.Run(fmt.Sprintf("ads=%t", adsCache), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := cache.NewSnapshotCache(adsCache, fleetHash{}, nil)
			srv := &gcp{cache: c, prev: map[types.ResponseType]string{}}
			if err := srv.set(makeWorld(clusters, 0, 0)); err != nil {
				t.Fatal(err)
			}
			g := newGCPServer(ctx, c, nil)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- g.Serve(lis) }()
			defer func() { g.Stop(); <-served }()

			f := newFleet(n, clusters, true, 10)
			if err := f.dial(lis.Addr().String()); err != nil {
				t.Fatal(err)
			}
			defer f.close()
			f.open(nil)
			defer func() {
				if err := f.stop(); err != nil {
					t.Error(err)
				}
			}()
			if _, err := waitFor(&f.ready, n, 20*time.Second); err != nil {
				t.Fatalf("delta proxies' first config from go-control-plane: %v (%s)", err, f.failures())
			}

			resources := f.resources.Load()
			f.started = time.Now()
			f.epoch.Add(1)
			if err := srv.set(makeWorld(clusters, 1, 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := waitFor(&f.edsSeen, n, 20*time.Second); err != nil {
				t.Fatalf("EDS change: %v (%s)", err, f.failures())
			}
			if got := f.resources.Load() - resources; got != n {
				t.Errorf("the EDS change sent %d resources to %d proxies, want one each (a delta of the changed assignment)", got, n)
			}

			f.epoch.Add(1)
			if err := srv.set(makeWorld(clusters, 1, 1)); err != nil {
				t.Fatal(err)
			}
			if _, err := waitFor(&f.rdsSeen, n, 20*time.Second); err != nil {
				t.Fatalf("route change: %v (%s)", err, f.failures())
			}
		})
	}
}
