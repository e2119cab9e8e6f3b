package xds

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"

	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// countingFleets counts the Notify callbacks registered and not removed.
type countingFleets struct {
	Fleets
	n atomic.Int32
}

func (c *countingFleets) Notify(f func()) func() {
	c.n.Add(1)
	un := c.Fleets.Notify(f)
	return func() { c.n.Add(-1); un() }
}

// A publish wakes streams connection by connection, whatever order they
// came in: one drainer handles them as queued, and each connection's
// streams come one after another (gRPC's writer then batches them). Once
// a connection's streams are gone, so is its callback, and a publish
// wakes only the streams left.
func TestPublishWakesConnectionByConnection(t *testing.T) {
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	counted := &countingFleets{Fleets: pub}
	f := &connFanout{fleets: counted}
	d := newDrainers(1)
	var mu sync.Mutex
	var order []string
	conns := []guard.Key{{Local: "l", Remote: "a"}, {Local: "l", Remote: "b"}, {Local: "l", Remote: "c"}}
	type member struct {
		k guard.Key
		w *wakeups
	}
	var members []member
	for i := range 30 { // registered a, b, c, a, b, c, ...
		k := conns[i%len(conns)]
		w := poolWakeup(d, func() error {
			mu.Lock()
			order = append(order, k.Remote)
			mu.Unlock()
			return nil
		})
		f.add(k, w)
		members = append(members, member{k, w})
	}
	publish := func(gen int) []string {
		mu.Lock()
		order = nil
		mu.Unlock()
		pub.Publish(fleet.NewFleet(world(t, reg, 1, uint32(gen), "c0"), time.Now()))
		for _, m := range members {
			m.w.wg.Wait()
		}
		waitUntil(t, 10*time.Second, "drainers still running", func() bool { return d.alive() == 0 })
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
	got := publish(1)
	if len(got) != 30 {
		t.Fatalf("a publish woke %d streams, want 30", len(got))
	}
	if runs := slices.Compact(slices.Clone(got)); len(runs) != len(conns) {
		t.Fatalf("streams woken in the order %v: connections interleaved, want each connection's streams together", got)
	}

	// Connection a's streams leave (one of them twice); b and c stay.
	var left []member
	for _, m := range members {
		if m.k.Remote == "a" {
			f.remove(m.k, m.w)
			f.remove(m.k, m.w)
			continue
		}
		left = append(left, m)
	}
	members = left
	f.mu.Lock()
	_, kept := f.conns[guard.Key{Local: "l", Remote: "a"}]
	f.mu.Unlock()
	if kept || counted.n.Load() != 2 {
		t.Fatalf("a connection without streams: still registered %v; %d publisher callbacks, want 2", kept, counted.n.Load())
	}
	got = publish(2)
	if len(got) != 20 || slices.Contains(got, "a") {
		t.Fatalf("after connection a's streams left, a publish woke %v; want b's and c's 20", got)
	}
	for _, m := range members {
		f.remove(m.k, m.w)
	}
	if n := len(f.conns); n != 0 || counted.n.Load() != 0 {
		t.Fatalf("%d connections registered, %d publisher callbacks, after every stream left", n, counted.n.Load())
	}
	if got := publish(3); len(got) != 0 {
		t.Fatalf("a publish with no stream left woke %v", got)
	}
}
