package snapshot

import (
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Fleet is everything the xDS server serves at one moment: the snapshot each
// node receives. In this version every node receives the same snapshot; node
// groups will map nodes to their group's snapshot here, so the server keeps
// asking the Fleet rather than holding one snapshot.
type Fleet struct {
	snap *Snapshot
	// AcceptedAt is when the change that produced this fleet was accepted
	// (the file event or API write), for push-latency figures.
	AcceptedAt time.Time
}

// NewFleet returns a fleet in which every node receives s.
func NewFleet(s *Snapshot, acceptedAt time.Time) *Fleet {
	return &Fleet{snap: s, AcceptedAt: acceptedAt}
}

// For returns the snapshot the node should run.
func (f *Fleet) For(*corev3.Node) *Snapshot { return f.snap }

// Version identifies the fleet's content.
func (f *Fleet) Version() string { return f.snap.Version() }

// Publisher holds the newest Fleet and wakes subscribers when it changes.
//
// Publishing never blocks: the fleet is stored atomically and each
// subscriber's one-slot channel gets a non-blocking send. A subscriber that
// is behind finds the slot full, reads Current when it gets to it and so
// skips every version in between.
type Publisher struct {
	cur  atomic.Pointer[Fleet]
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
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
	if old := p.cur.Load(); old != nil && old.Version() == f.Version() {
		return false
	}
	p.cur.Store(f)
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
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
