package guard

import (
	"sync"
	"time"
)

// SendWatch bounds a stream's sends. grpc-go's SendMsg returns once the
// message is queued within the stream's flow-control window; a client that
// never reads grants no more window, and the next SendMsg blocks for as
// long as the client likes. The watch, armed for each send:
//   - after stall (Options.MaxSlotHold), releases the send's initial-send
//     admission slot (the send itself goes on), so that clients that do
//     not read cannot hold every slot and turn well-behaved proxies away;
//   - after evict, closes the stream's connection, which is what makes the
//     blocked SendMsg return; the stream then ends as refused ("stalled").
//
// Its timer callback runs on its own goroutine and touches only the
// watch's fields (under mu) and the server's connection registry, never
// the stream's state, which its loop owns.
//
// The timer is armed lazily: a send arms it only when it is not armed
// already, and the end of a send leaves it be. When it fires with no send
// in flight it stays unarmed; with one, it is set for what that send has
// left. A stream sending every second arms it once a stall period rather
// than resetting and stopping it on every send: Reset and Stop on the
// runtime's timer heap show in the CPU profile of the fleet benchmark's
// route change (bench/fleet -n 5000 -profile).
type SendWatch struct {
	stall, evict time.Duration
	onEvict      func() // closes the stream's connection

	mu      sync.Mutex
	timer   *time.Timer
	armed   bool      // timer is set to fire
	started time.Time // zero while no send is in flight
	release func()    // the send's admission slot, nil once released
	stalled bool      // the send in flight outlived stall
	evicted bool
	// stopped is set when the stream ended: a timer firing late, or a
	// send begun after (a bug), never evicts a connection then.
	stopped bool
}

// NewSendWatch returns the watch of one stream's sends: after stall a
// send gives its admission slot back, after evict onEvict is called (it
// closes the stream's connection).
func NewSendWatch(stall, evict time.Duration, onEvict func()) *SendWatch {
	return &SendWatch{stall: stall, evict: evict, onEvict: onEvict}
}

// Begin arms the watch for a send holding release (nil: no slot).
func (w *SendWatch) Begin(release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started, w.release, w.stalled = time.Now(), release, false
	if w.stopped || w.armed {
		// An armed timer fires no later than stall after this send
		// began (it was set at or before now, for at most stall: only a
		// stalled send sets it for longer, and its end disarms it), and
		// fire re-arms it for the rest.
		return
	}
	w.armed = true
	if w.timer == nil {
		w.timer = time.AfterFunc(w.stall, w.fire)
	} else {
		w.timer.Reset(w.stall)
	}
}

// End marks the send returned, releasing its slot if the watch has not,
// and reports whether the stream was evicted meanwhile. The timer is left
// armed (see SendWatch).
func (w *SendWatch) End() (evicted bool) {
	w.mu.Lock()
	if w.stalled && w.armed && !w.evicted {
		// A stalled send left the timer set for its eviction, later than
		// the next send's stall: the next send arms it afresh.
		w.timer.Stop()
		w.armed = false
	}
	rel := w.release
	w.started, w.release = time.Time{}, nil
	evicted = w.evicted
	w.mu.Unlock()
	if rel != nil {
		rel()
	}
	return evicted
}

// Stop disarms the watch for good, when the stream ends.
func (w *SendWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.started, w.stopped, w.armed = time.Time{}, true, false
}

// fire runs when the timer expires. A send may have ended and another
// begun since the timer was set, so it decides by the elapsed time of the
// send in flight, not by which timer this is.
func (w *SendWatch) fire() {
	w.mu.Lock()
	if w.started.IsZero() || w.evicted || w.stopped {
		// No send in flight: the next one arms the timer again.
		w.armed = false
		w.mu.Unlock()
		return
	}
	elapsed := time.Since(w.started)
	switch {
	case elapsed < w.stall:
		w.timer.Reset(w.stall - elapsed)
		w.mu.Unlock()
	case !w.stalled:
		w.stalled = true
		rel := w.release
		w.release = nil
		w.timer.Reset(max(w.evict-elapsed, 0))
		w.mu.Unlock()
		if rel != nil {
			rel()
		}
	case elapsed < w.evict:
		w.timer.Reset(w.evict - elapsed)
		w.mu.Unlock()
	default:
		w.evicted = true
		w.mu.Unlock()
		w.onEvict()
	}
}
