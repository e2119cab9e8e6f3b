package guard

import (
	"sync/atomic"
	"testing"
	"time"
)

// Once the stream ended (stop), the watch never evicts its connection: not
// on a timer firing late, nor for a send begun after. The fires are
// called directly, as the timer would, with the send made to look old.
func TestSendWatchStoppedNeverEvicts(t *testing.T) {
	evicted := 0
	w := &SendWatch{stall: time.Hour, evict: 2 * time.Hour, onEvict: func() { evicted++ }}
	released := 0
	w.Begin(func() { released++ })
	w.Stop()
	w.Begin(nil) // a send after the stream ended
	w.mu.Lock()
	w.started = time.Now().Add(-3 * time.Hour)
	w.mu.Unlock()
	w.fire() // past stall
	w.fire() // past evict
	if evicted != 0 {
		t.Fatalf("onEvict called %d times after the watch stopped", evicted)
	}
	if w.End() {
		t.Fatal("a send after stop reported evicted")
	}

	// The same without stop evicts: the fires above are what a timer does.
	// The first fire re-arms the real timer at zero, so the eviction may
	// come from the timer's goroutine as well as from the second call:
	// either way it comes once.
	var evictions atomic.Int32
	evictedc := make(chan struct{}, 2)
	live := &SendWatch{stall: time.Hour, evict: 2 * time.Hour, onEvict: func() {
		evictions.Add(1)
		evictedc <- struct{}{}
	}}
	live.Begin(nil)
	live.mu.Lock()
	live.started = time.Now().Add(-3 * time.Hour)
	live.mu.Unlock()
	live.fire()
	live.fire()
	select {
	case <-evictedc:
	case <-time.After(10 * time.Second):
		t.Fatal("a send past evict on a live watch: onEvict never called")
	}
	if n := evictions.Load(); n != 1 || !live.End() {
		t.Fatalf("a send past evict on a live watch: onEvict called %d times, end reports evicted %v", n, live.End())
	}
	live.Stop()
}

// The timer is armed once for many sends, and each send is still judged
// by its own start: a fire while a later send is in flight waits for what
// that send has left, and a fire with none in flight disarms until the
// next send. The fires are called directly, as the timer would.
func TestSendWatchArmsLazily(t *testing.T) {
	released := 0
	w := &SendWatch{stall: time.Hour, evict: 2 * time.Hour, onEvict: func() { t.Error("evicted") }}
	defer w.Stop()
	w.Begin(nil)
	w.End()
	timer := w.timer
	w.Begin(func() { released++ })
	if w.timer != timer || !w.armed {
		t.Fatalf("a second send while armed: timer replaced %v, armed %v", w.timer != timer, w.armed)
	}
	// The timer fires (set by the first send) while the second is young.
	w.mu.Lock()
	w.started = time.Now().Add(-30 * time.Minute)
	w.mu.Unlock()
	w.fire()
	if released != 0 || !w.armed {
		t.Fatalf("a fire 30 minutes into a send with a 1 hour stall: released %d, armed %v", released, w.armed)
	}
	w.mu.Lock()
	w.started = time.Now().Add(-61 * time.Minute)
	w.mu.Unlock()
	w.fire()
	if released != 1 {
		t.Fatalf("a fire past stall: slot released %d times, want 1", released)
	}
	if w.End() {
		t.Fatal("a send past stall but not evict reported evicted")
	}
	if w.armed {
		// The fire past stall set the timer for the eviction, an hour
		// off: the next send's slot would be held that long.
		t.Fatal("a stalled send ended with the timer still set for its eviction")
	}
	w.Begin(nil)
	w.End()
	w.fire() // nothing in flight
	if w.armed {
		t.Fatal("a fire with no send in flight left the timer armed")
	}
	w.Begin(nil)
	if !w.armed {
		t.Fatal("a send after the timer disarmed did not arm it")
	}
	w.End()
}
