package xds

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
	w := &sendWatch{stall: time.Hour, evict: 2 * time.Hour, onEvict: func() { evicted++ }}
	released := 0
	w.begin(func() { released++ })
	w.stop()
	w.begin(nil) // a send after the stream ended
	w.mu.Lock()
	w.started = time.Now().Add(-3 * time.Hour)
	w.mu.Unlock()
	w.fire() // past stall
	w.fire() // past evict
	if evicted != 0 {
		t.Fatalf("onEvict called %d times after the watch stopped", evicted)
	}
	if w.end() {
		t.Fatal("a send after stop reported evicted")
	}

	// The same without stop evicts: the fires above are what a timer does.
	// The first fire re-arms the real timer at zero, so the eviction may
	// come from the timer's goroutine as well as from the second call:
	// either way it comes once.
	var evictions atomic.Int32
	evictedc := make(chan struct{}, 2)
	live := &sendWatch{stall: time.Hour, evict: 2 * time.Hour, onEvict: func() {
		evictions.Add(1)
		evictedc <- struct{}{}
	}}
	live.begin(nil)
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
	if n := evictions.Load(); n != 1 || !live.end() {
		t.Fatalf("a send past evict on a live watch: onEvict called %d times, end reports evicted %v", n, live.end())
	}
	live.stop()
}
