package fleet

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Publisher holds the newest Fleet and wakes subscribers when it changes.
//
// Publishing never waits on a subscriber: the fleet is stored atomically
// and each subscriber's one-slot channel gets a non-blocking send. A
// subscriber that is behind finds the slot full, reads Current when it
// gets to it and so skips every version in between.
//
// Publishes may come from several goroutines, and from a Notify callback.
// Each one's compare and store is atomic, so the fleet current is the
// newest publish's; the callbacks run for one publish at a time (their
// state needs no lock of its own). A publish made while another walks the
// callbacks returns once its fleet is current and leaves the walk to the
// one under way, which walks them again when done: every callback reads
// Current, so one more walk wakes everyone to the newest fleet, and a
// callback that publishes does not wait on itself.
type Publisher struct {
	cur  atomic.Pointer[Fleet]
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// fns are the Notify callbacks, one per stream of a fleet: a slice,
	// which a publish walks in order, where a map cost a few cache misses
	// per entry (BenchmarkPublishNotify).
	fns []notified
	// walking is set while a publish walks the callbacks, without the
	// lock; again, when another publish stored a fleet meanwhile. shared
	// says the walk holds fns: a Notify or a stop meanwhile changes a copy
	// (own), never what it walks.
	walking, again, shared bool
}

// notified is a Notify callback and where its index in fns is kept, for
// removal (-1 once removed).
type notified struct {
	f  func()
	at *int
}

// NewPublisher returns a publisher with nothing published.
func NewPublisher() *Publisher {
	return &Publisher{subs: map[chan struct{}]struct{}{}}
}

// Current returns the newest fleet, or nil before the first publish.
func (p *Publisher) Current() *Fleet { return p.cur.Load() }

// Publish makes f current and wakes subscribers. It returns false, and
// changes nothing, when f has the same version as the current fleet.
func (p *Publisher) Publish(f *Fleet) bool {
	p.mu.Lock()
	if old := p.cur.Load(); old != nil && old.Version() == f.Version() {
		p.mu.Unlock()
		return false
	}
	// Current before anyone is woken: a woken stream reads Current and
	// serves what it finds until the next wake-up.
	p.cur.Store(f)
	if p.walking {
		p.again = true // the walk under way wakes everyone again
		p.mu.Unlock()
		return true
	}
	p.walking = true
	p.walk()
	return true
}

// walk calls the callbacks, with mu held, and again as long as publishes
// come meanwhile; it returns with mu released. Should a callback panic
// (and its caller, an HTTP handler say, recover), the next publish walks:
// none is left waiting on a walk that ended.
func (p *Publisher) walk() {
	done := false
	defer func() {
		if !done {
			p.mu.Lock()
			p.walking, p.again, p.shared = false, false, false
			p.mu.Unlock()
		}
	}()
	for {
		fns := p.wake()
		p.mu.Unlock()
		// Outside the lock: a callback may register, stop or publish.
		for _, n := range fns {
			n.f()
		}
		p.mu.Lock()
		p.shared = false
		if !p.again {
			break
		}
		p.again = false
	}
	p.walking = false
	p.mu.Unlock()
	done = true
}

// wake posts to every subscriber and returns the callbacks to call, which
// stay as they are until the walk is done (see own). mu is held.
func (p *Publisher) wake() []notified {
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.shared = true
	return p.fns
}

// own makes fns the publisher's to change, with mu held: a copy while a
// publish walks them. One copy per walk at most, and only when a stream
// opens or closes during one: a publish itself copies nothing.
func (p *Publisher) own() {
	if p.shared {
		p.fns = slices.Clone(p.fns)
		p.shared = false
	}
}

// Notify calls f after each publish, and returns a function that stops
// the calls. f runs once the fleet is current, on the publishing goroutine
// (or, for publishes made while another walks the callbacks, on that one's,
// once for all of them), never for two publishes at once, without the
// publisher's lock, so it may register, stop or publish; it should return
// soon, as the publish waits for it. A publish under way
// when stop is called may still call f once. Unlike Subscribe it needs no
// goroutine waiting on a channel: what f starts ends when done.
func (p *Publisher) Notify(f func()) func() {
	at := new(int)
	p.mu.Lock()
	p.own()
	*at = len(p.fns)
	p.fns = append(p.fns, notified{f, at})
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		i := *at
		if i < 0 {
			return
		}
		p.own()
		// The last callback takes the removed one's place.
		last := len(p.fns) - 1
		p.fns[i] = p.fns[last]
		*p.fns[i].at = i
		p.fns[last] = notified{}
		p.fns = p.fns[:last]
		*at = -1
	}
}

// Subscribe returns a channel that receives a value after each publish
// (coalesced), and a function that unsubscribes.
func (p *Publisher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}
