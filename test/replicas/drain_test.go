package replicas_test

import (
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// Issue 14 item 6: SIGTERM hands a replica's proxies over as a trickle.
// Twenty proxies (SotW and delta) reach replica A through the load
// balancer; A gets SIGTERM with a 2s drain period: its /readyz says 503
// "draining" at once (the balancer takes it out), it ends its streams
// spread over the period rather than all at once, every proxy ends SYNCED
// on B and is resent nothing it holds, and A exits 0 within the drain and
// its grace.
func TestDrainSIGTERM(t *testing.T) {
	const period, grace = 2 * time.Second, 5 * time.Second
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	// Balancing off: this test's balancer prefers A, which would refuse,
	// again and again, the proxies it shed to come down to its share.
	a := f.start("replica-a", "--drain-period", period.String(), "--shutdown-grace", grace.String(), "--balance=false")
	b := f.start("replica-b", "--balance=false")
	fwd := startForwarder(t, a.xdsAddr, b.xdsAddr)

	var envoys []*envoy
	var nodes []string
	for i := range 20 {
		delta := i%2 == 1
		e := startEnvoy(t, fwd.Addr(), fmt.Sprintf("drain-%s-%d", map[bool]string{false: "sotw", true: "delta"}[delta], i), delta)
		envoys = append(envoys, e)
		nodes = append(nodes, e.node)
	}
	for _, e := range envoys {
		e.ready("backend", "greeter")
	}
	waitRows(a, a.id, allSynced(a.id, nodes...), nodes...)
	before, streams := make([][2]int, len(envoys)), make([]int, len(envoys))
	for i, e := range envoys {
		before[i][0], before[i][1] = e.received()
		streams[i] = e.streamCount()
	}

	signalled := time.Now()
	a.signal(syscall.SIGTERM)
	waitUntil(t, a.id+"'s /readyz answering 503 draining", func() bool {
		code, word := a.readyz()
		return code == http.StatusServiceUnavailable && word == "draining"
	})
	// At once: before most of the drain has passed (a fixed fraction of a
	// second failed on a loaded 2-core machine); a readiness that turns
	// only at the drain's end fails this, and the order is checked against
	// the streams' ends below.
	notReady := time.Since(signalled)
	if notReady > period*3/4 {
		t.Errorf("/readyz said draining %v after SIGTERM, want at once (well within the %v drain)", notReady, period)
	}
	// The balancer takes A out on its readiness.
	fwd.markDead(a.xdsAddr)

	waitRows(b, b.id, allSynced(b.id, nodes...), nodes...)
	checkNothingResent(t, envoys, before, streams, b.id)
	if n := fwd.routedTo(b.xdsAddr); n < len(envoys) {
		t.Errorf("the balancer sent %d connections to %s, want one per proxy (%d) at least", n, b.id, len(envoys))
	}
	var ends []time.Duration
	for _, e := range envoys {
		end := e.endedAfter(signalled)
		if end.IsZero() {
			t.Fatalf("%s is SYNCED on %s but its stream on %s never ended:\n%v", e.node, b.id, a.id, e)
		}
		ends = append(ends, end.Sub(signalled))
	}
	slices.Sort(ends)
	t.Logf("streams ended by the drain at %v after SIGTERM; not ready after %v", ends, notReady)
	if last := ends[len(ends)-1]; notReady >= last {
		t.Errorf("/readyz said draining %v after SIGTERM, after the last stream ended (%v): the balancer would keep sending proxies to %s", notReady, last, a.id)
	}
	// Spread: not a storm of reconnections at the start, nor all at the
	// end, and within the period and a little.
	if spread := ends[len(ends)-1] - ends[0]; spread < period/2 {
		t.Errorf("the drain ended the 20 streams within %v of each other, want them spread over the %v period: %v", spread, period, ends)
	}
	if last := ends[len(ends)-1]; last > period+grace {
		t.Errorf("the last stream ended %v after SIGTERM, beyond the %v drain and %v grace", last, period, grace)
	}
	if code := a.waitExit(period + grace + 5*time.Second); code != 0 {
		t.Errorf("%s exited %d after the drain, want 0", a.id, code)
	}
	t.Logf("%s exited 0 %v after SIGTERM", a.id, time.Since(signalled).Round(time.Millisecond))
}
