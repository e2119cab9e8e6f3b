package daemon

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// TestDrainFleetStatus: on etcd, a draining replica keeps publishing its
// fleet status, so another replica's /proxies sees its proxies leave a
// few at a time during the drain, not all at once at its end; once it has
// stopped, its entry is removed at once (not left to its lease).
func TestDrainFleetStatus(t *testing.T) {
	srv := etcdtest.Start(t)
	base := etcdOptions(srv, "/drainfleet")
	// A lease far longer than the test's bound on the entry's removal:
	// only the replica's own withdrawal removes it in time.
	base.FleetStatusPeriod, base.FleetStatusTTL = 100*time.Millisecond, 30*time.Second
	a, b := base, base
	a.Identifier, a.DrainPeriod, a.ShutdownGrace = "replica-a", 3*time.Second, 2*time.Second
	b.Identifier = "replica-b"
	ra, rb := startDaemon(t, a), startDaemon(t, b)
	for _, node := range []string{"fleet-a", "fleet-b", "fleet-c"} {
		connect(t, ra.xdsAddr, node)
	}
	onA := func() int {
		n := 0
		for _, s := range rb.proxies(t) {
			if s.Replica == "replica-a" && s.Gone == nil {
				n++
			}
		}
		return n
	}
	if !waitUntil(10*time.Second, func() bool { return onA() == 3 }) {
		t.Fatalf("replica-b does not list replica-a's 3 proxies: %d", onA())
	}

	ra.cancel()
	seen := map[int]bool{}
	deadline := time.Now().Add(a.DrainPeriod + drainSlack(a.DrainPeriod) + a.ShutdownGrace + 2*time.Second)
	for !ra.done && time.Now().Before(deadline) {
		seen[onA()] = true
		select {
		case ra.err = <-ra.errc:
			ra.ended, ra.done = time.Now(), true
			if ra.err != nil {
				t.Fatalf("replica-a: %v", ra.err)
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("replica-a's proxies as replica-b listed them during the drain: %v", seen)
	if !ra.done {
		t.Fatal("replica-a did not stop within its drain period and shutdown grace")
	}
	if !seen[1] && !seen[2] {
		t.Errorf("replica-b saw replica-a's proxies go from 3 to 0 at once (counts seen: %v), not a few at a time", seen)
	}
	if !waitUntil(5*time.Second, func() bool { return onA() == 0 }) {
		t.Fatalf("replica-a stopped, but replica-b still lists %d of its proxies: its entry was not removed", onA())
	}
}
