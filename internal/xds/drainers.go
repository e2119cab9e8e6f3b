package xds

import (
	"sync"
	"sync/atomic"
)

// drainers run the streams' wakeups (wakeups.drain) on a few goroutines
// rather than one started for each: a publish wakes every stream of the
// fleet at once, and starting and ending a goroutine per stream (and
// scheduling it) stands out in the CPU profile of the fleet benchmark's
// route change (bench/fleet -n 5000 -profile).
//
// A wakeup can block for long: its send waits while the client does not
// read (up to the send watch's eviction), a first send waits for an
// admission slot, and the stream's mutex may be held by its reader, itself
// in such a send. So a drainer about to wait (mayBlock) no longer counts
// towards the target, and another starts if wakeups are queued: however
// many clients stall, target drainers are free to move the queue, as the
// goroutine per wakeup was. A drainer ends as soon as the queue is empty,
// or after the wakeup it runs when more than twice the target are free:
// the margin keeps a drainer from being started and ended around every
// send of a fan-out that does not block. Drainers are owned by the queue:
// none outlives the wakeups queued, and a stream's end waits for its own
// (wakeups.finish).
type drainers struct {
	target int32

	mu    sync.Mutex
	queue []*wakeups
	head  int // queue[head:] are waiting

	// running are the drainers alive (changed under mu); blocked, those
	// of them in a section that may block; queued, len(queue)-head. All
	// three are read by mayBlock without mu.
	running atomic.Int32
	blocked atomic.Int32
	queued  atomic.Int32
	// started counts the drainers ever started, for tests.
	started atomic.Int64
}

func newDrainers(target int) *drainers { return &drainers{target: int32(max(target, 1))} }

// submit queues w's drain and starts a drainer if too few are free.
func (d *drainers) submit(w *wakeups) {
	d.mu.Lock()
	d.queue = append(d.queue, w)
	d.queued.Add(1)
	d.startLocked()
	d.mu.Unlock()
}

// startLocked starts a drainer if wakeups wait and fewer than target
// drainers are free; mu is held.
func (d *drainers) startLocked() {
	if d.head < len(d.queue) && d.running.Load()-d.blocked.Load() < d.target {
		d.running.Add(1)
		d.started.Add(1)
		go d.run()
	}
}

// run drains queued wakeups until none waits, or until it is one drainer
// too many.
func (d *drainers) run() {
	for {
		d.mu.Lock()
		if d.head == len(d.queue) || d.running.Load()-d.blocked.Load() > 2*d.target {
			d.running.Add(-1)
			if d.head == len(d.queue) {
				clear(d.queue)
				d.queue, d.head = d.queue[:0], 0
			}
			d.mu.Unlock()
			return
		}
		w := d.pop()
		d.mu.Unlock()
		w.drain()
	}
}

// pop takes the oldest queued wakeup; mu is held and one is queued. Under
// a steady churn the queue may never empty: its taken head is dropped once
// it is half the queue, so the queue holds at most twice what waits.
func (d *drainers) pop() *wakeups {
	w := d.queue[d.head]
	d.queue[d.head] = nil
	d.head++
	d.queued.Add(-1)
	if d.head >= 1024 && 2*d.head >= len(d.queue) {
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
	return w
}

// mayBlock is called by a drainer before what may wait long; the drainer
// no longer counts as free until unblocked. If wakeups wait, another
// drainer starts. blocked is raised before queued is read: a submit after
// that read sees it raised.
func (d *drainers) mayBlock() {
	b := d.blocked.Add(1)
	if d.queued.Load() == 0 || d.running.Load()-b >= d.target {
		return // nothing waits, or enough are free: no lock
	}
	d.mu.Lock()
	d.startLocked()
	d.mu.Unlock()
}

func (d *drainers) unblocked() { d.blocked.Add(-1) }
