package xds

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing the test after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (d *drainers) alive() int32 {
	return d.running.Load()
}

// poolWakeup is a stream's wakeups as the pool sees them, handling with h.
func poolWakeup(d *drainers, h func() error) *wakeups {
	return &wakeups{pool: d, handle: func(uint8) error { return h() }, cut: func() {}}
}

// With nothing blocking, a burst of wakeups (a publish to every stream)
// runs on at most target goroutines, and they end once the queue is
// empty: no goroutine per wakeup, none left behind.
func TestDrainersBoundedWhenNothingBlocks(t *testing.T) {
	d := newDrainers(2)
	var now, most, done atomic.Int32
	ws := make([]*wakeups, 100)
	for i := range ws {
		ws[i] = poolWakeup(d, func() error {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond) // a wakeup's work, which another could overlap
			now.Add(-1)
			done.Add(1)
			return nil
		})
	}
	for _, w := range ws {
		w.post(wakeFleet)
	}
	for _, w := range ws {
		w.wg.Wait()
	}
	if done.Load() != int32(len(ws)) || most.Load() > 2 {
		t.Fatalf("%d wakeups handled, at most %d at once; want %d, at most 2 (the target)", done.Load(), most.Load(), len(ws))
	}
	waitUntil(t, 10*time.Second, "drainers still running with nothing queued", func() bool { return d.alive() == 0 })
}

// Wakeups that wait (sends to clients that do not read, more of them than
// the target) do not hold the others up: a drainer about to wait lets
// another start, as a goroutine per wakeup would. Once they are released,
// the extra drainers end.
func TestDrainersMoveOnPastBlockedOnes(t *testing.T) {
	d := newDrainers(2)
	release := make(chan struct{})
	var blocked, done atomic.Int32
	var stuck []*wakeups
	for range 5 {
		w := poolWakeup(d, func() error {
			d.mayBlock()
			blocked.Add(1)
			<-release
			d.unblocked()
			return nil
		})
		stuck = append(stuck, w)
		w.post(wakeFleet)
	}
	waitUntil(t, 10*time.Second, "5 stalling wakeups not all started", func() bool { return blocked.Load() == 5 })
	var others []*wakeups
	for range 100 {
		w := poolWakeup(d, func() error { done.Add(1); return nil })
		others = append(others, w)
		w.post(wakeFleet)
	}
	waitUntil(t, 10*time.Second, "wakeups queued behind stalled ones were not handled", func() bool { return done.Load() == 100 })
	close(release)
	var wg sync.WaitGroup
	for _, w := range append(stuck, others...) {
		wg.Go(w.wg.Wait)
	}
	wg.Wait()
	waitUntil(t, 10*time.Second, "drainers still running after every wakeup ended", func() bool { return d.alive() == 0 })
}

// Under a churn that never lets the queue empty, it does not keep what was
// taken: it stays within twice what waits.
func TestDrainersQueueStaysBounded(t *testing.T) {
	d := newDrainers(1)
	d.mu.Lock()
	for range 5000 {
		d.queue = append(d.queue, &wakeups{})
		d.queued.Add(1)
	}
	for range 20000 {
		d.pop()
		d.queue = append(d.queue, &wakeups{}) // one more arrives for each taken
		d.queued.Add(1)
	}
	waiting, held := len(d.queue)-d.head, len(d.queue)
	d.mu.Unlock()
	if waiting != 5000 || held > 2*waiting+1024 {
		t.Fatalf("%d waiting, %d held in the queue; want 5000 waiting, at most twice that held", waiting, held)
	}
}

// A fan-out whose sends do not block (each still announced by mayBlock,
// as stream.send does) starts a handful of drainers, not one per send. The
// wakeups are all queued before the first is handled, as a publish queues
// a fleet's: on a busy machine the test could otherwise post slower than
// the drainers drain, and each post to an empty queue rightly starts one.
func TestDrainersDoNotChurnOnQuickSends(t *testing.T) {
	d := newDrainers(2)
	queued := make(chan struct{})
	ws := make([]*wakeups, 500)
	for i := range ws {
		ws[i] = poolWakeup(d, func() error {
			<-queued
			d.mayBlock()
			d.unblocked()
			return nil
		})
	}
	for _, w := range ws {
		w.post(wakeFleet)
	}
	close(queued)
	for _, w := range ws {
		w.wg.Wait()
	}
	if n := d.started.Load(); n > 8 {
		t.Fatalf("%d drainers started for 500 wakeups whose sends return at once; want a handful (target 2)", n)
	}
	waitUntil(t, 10*time.Second, "drainers still running with nothing queued", func() bool { return d.alive() == 0 })
}

// A stream woken again while it is handled (a burst of publishes, kicks,
// heartbeats) goes back to the end of the queue after each round rather
// than keep its drainer: a stream queued behind it is handled next.
func TestDrainersTakeTurns(t *testing.T) {
	d := newDrainers(1)
	var mu sync.Mutex
	var order []string
	note := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
		return len(order)
	}
	var a *wakeups
	rounds := 0
	bQueued := make(chan struct{})
	a = poolWakeup(d, func() error {
		if note("a") == 1 {
			<-bQueued
		}
		if rounds++; rounds < 10 {
			a.post(wakeFleet) // woken again meanwhile
		}
		return nil
	})
	b := poolWakeup(d, func() error { note("b"); return nil })
	a.post(wakeFleet)
	b.post(wakeFleet) // queued while a's first round runs
	close(bQueued)
	a.wg.Wait()
	b.wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 11 || order[1] != "b" {
		t.Fatalf("handled in the order %v: b waited for a's every round", order)
	}
}
