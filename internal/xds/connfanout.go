package xds

import (
	"slices"
	"sync"

	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// connFanout wakes a publish's streams connection by connection: one
// Notify callback per connection posts each of its streams in turn, so the
// drainers push to one connection's streams one after another. gRPC's
// writer for a connection then finds several responses queued and writes
// them in one system call; with the streams of a hundred connections
// interleaved (a callback per stream, in the order they registered), it
// woke for each response and wrote it alone: a write(2) per proxy, which
// stands out in the CPU profile of the fleet benchmark's route change
// (bench/fleet -n 5000 -profile).
type connFanout struct {
	fleets Fleets

	mu    sync.Mutex
	conns map[guard.Key]*connWakes
}

// connWakes are one connection's streams, woken by one callback.
type connWakes struct {
	mu       sync.Mutex
	ws       []*wakeups
	unnotify func()
}

// wake posts a publish to every stream of the connection: Notify's
// callback, which must return at once (post never blocks).
func (c *connWakes) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.ws {
		w.post(wakeFleet)
	}
}

// add makes a publish wake w with the other streams of connection k, until
// remove(k, w). A connection's first stream registers its callback with
// the publisher under f.mu; the publisher's lock is held only to add it
// (a publish walks the callbacks without it, and c.wake takes c.mu, not
// f.mu), so a stream open does not wait out a publish's fan-out. Streams
// of no known connection (served on ServeStream without a peer) share one
// entry.
func (f *connFanout) add(k guard.Key, w *wakeups) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.conns[k]
	if c == nil {
		if f.conns == nil {
			f.conns = map[guard.Key]*connWakes{}
		}
		c = &connWakes{}
		c.unnotify = f.fleets.Notify(c.wake)
		f.conns[k] = c
	}
	c.mu.Lock()
	c.ws = append(c.ws, w)
	c.mu.Unlock()
}

// remove takes w off connection k's streams, and the connection's
// callback off the publisher once it has none; a second remove does
// nothing. A connection has at most MaxStreamsPerConnection streams: the
// search is short.
func (f *connFanout) remove(k guard.Key, w *wakeups) {
	f.mu.Lock()
	c := f.conns[k]
	if c == nil {
		f.mu.Unlock()
		return
	}
	c.mu.Lock()
	if i := slices.Index(c.ws, w); i >= 0 {
		last := len(c.ws) - 1
		c.ws[i] = c.ws[last]
		c.ws[last] = nil
		c.ws = c.ws[:last]
	}
	var unnotify func()
	if len(c.ws) == 0 {
		delete(f.conns, k)
		unnotify = c.unnotify
	}
	c.mu.Unlock()
	f.mu.Unlock()
	if unnotify != nil {
		unnotify()
	}
}
