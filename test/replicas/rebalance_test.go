package replicas_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// README's "--max-connection-age ... rebalances after a scale-up": every
// proxy on one replica, a second started behind the same round-robin
// balancer takes a share of them once their connections reach their age,
// with no proxy restarting or asked to move.
func TestScaleUpRebalances(t *testing.T) {
	const n = 6
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	age := []string{"--max-connection-age", "2s", "--max-connection-age-grace", "200ms"}
	a := f.start("replica-a", age...)
	version := a.apply(greeterDoc(startBackend(t, "backend-1"))).Version
	sameVersion(t, []*replica{a}, version)
	lb := startForwarder(t, a.xdsAddr)
	var envoys []*envoy
	for i := range n {
		e := startEnvoy(t, lb.Addr(), fmt.Sprintf("envoy-scale-%d", i), false)
		e.ready("backend", "greeter")
		envoys = append(envoys, e)
	}
	if on := servedBy(envoys, a.id); on != n {
		t.Fatalf("%d of %d proxies on %s before the scale-up", on, n, a.id)
	}

	b := f.start("replica-b", age...)
	sameVersion(t, []*replica{a, b}, version)
	lb.balance(b.xdsAddr)
	scaled := time.Now()
	// Within a few ages (2s ±10% each, plus the grace), the reconnects
	// alternate between the two: B serves a third of the fleet at least.
	deadline := scaled.Add(20 * time.Second)
	for servedBy(envoys, b.id) < n/3 {
		if time.Now().After(deadline) {
			t.Fatalf("%v after the scale-up, %s serves %d of %d proxies (%s: %d); the balancer sent it %d connections",
				time.Since(scaled).Round(time.Millisecond), b.id, servedBy(envoys, b.id), n, a.id, servedBy(envoys, a.id), lb.routedTo(b.xdsAddr))
		}
		time.Sleep(50 * time.Millisecond) // polling the proxies' own state
	}
	t.Logf("%v after the scale-up, %s serves %d of %d proxies", time.Since(scaled).Round(time.Millisecond), b.id, servedBy(envoys, b.id), n)
	for _, e := range envoys {
		e.ready("backend", "greeter")
	}
}

// servedBy counts the proxies whose last response came from replica.
func servedBy(envoys []*envoy, replica string) int {
	n := 0
	for _, e := range envoys {
		if e.identifier() == replica {
			n++
		}
	}
	return n
}
