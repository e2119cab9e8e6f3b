package status

import (
	"cmp"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// What the dashboard reads besides the streams: recent push latencies per
// type, and how far the newest change has got. Both are kept bounded.

// latencySamples is how many recent push latencies are kept per type: a
// fixed window, so that percentiles describe the last few changes and the
// memory does not grow with the fleet's history.
const latencySamples = 1024

// ring holds the newest latencySamples durations. Harvests add them (two
// readers harvest at once, each under a different shard's lock), and so
// do streams as they end (freeze): a slot is claimed by an
// atomic count and written atomically, so adding takes no lock of its
// own. (When every ACK of the fleet added its sample, the sample's lock
// and lookup were 2.6% of a route change's CPU at 5,000 streams.) A
// reader racing an add may see the slot's previous sample, or, while the
// ring fills, a slot claimed and not yet written: slots hold a
// sample plus one, so such a slot reads 0 and is left out rather than
// taken for a latency of 0.
//
// The slots are in shards, by stream: one count that both cores added to
// for every stream's ACK was 1.8% of an EDS change at 5,000 streams. Each
// sample keeps its time, and the window is the newest latencySamples of
// all shards: the shards hold twice that, so that a shard whose streams
// went quiet holds samples that fall out of the window rather than stay
// in it.
type ring struct {
	name   string // the type's name (Options.Abbrev)
	shards [ringShards]ringShard
}

const (
	ringShards = 8
	shardSlots = 2 * latencySamples / ringShards
)

type ringShard struct {
	n     atomic.Uint64 // every sample ever added
	_     [56]byte      // n on a cache line of its own
	slots [shardSlots]slot
}

// slot is a sample: d, and its time (Unix nanoseconds), written after it.
// Side by side, so that an add writes one cache line, not two.
type slot struct{ d, at atomic.Int64 }

// add adds d, taken at at, from stream key.
func (r *ring) add(key uint64, at time.Time, d time.Duration) {
	s := &r.shards[key%ringShards]
	i := (s.n.Add(1) - 1) % shardSlots
	s.slots[i].d.Store(int64(max(d, 0)) + 1)
	s.slots[i].at.Store(at.UnixNano())
}

// samples copies the newest latencySamples samples out, and the count
// ever added.
func (r *ring) samples() ([]time.Duration, uint64) {
	type sample struct{ at, d int64 }
	var all []sample
	var total uint64
	for i := range r.shards {
		s := &r.shards[i]
		n := s.n.Load()
		total += n
		for j := range min(n, shardSlots) {
			if v := s.slots[j].d.Load(); v > 0 {
				all = append(all, sample{s.slots[j].at.Load(), v - 1})
			}
		}
	}
	if len(all) > latencySamples {
		slices.SortFunc(all, func(a, b sample) int { return cmp.Compare(b.at, a.at) })
		all = all[:latencySamples]
	}
	out := make([]time.Duration, len(all))
	for i, x := range all {
		out[i] = time.Duration(x.d)
	}
	return out, total
}

// Latency is the push latency of changes to one type, over the newest
// Window samples: the time from a change's acceptance to each proxy's
// first ACK of it.
type Latency struct {
	Type   string        `json:"type"`
	Window int           `json:"window"` // samples the percentiles are over
	Total  uint64        `json:"total"`  // samples since start
	P50    time.Duration `json:"p50"`
	P90    time.Duration `json:"p90"`
	P99    time.Duration `json:"p99"`
	Max    time.Duration `json:"max"`
}

// Latencies returns the push latency percentiles per type name, sorted by
// type; types without a push yet are left out. It harvests the live
// streams' pushes first (Harvest).
func (t *Tracker) Latencies() []Latency {
	t.Harvest()
	rings := t.latency.Load()
	samples := make(map[string][]time.Duration, len(rings))
	totals := make(map[string]uint64, len(rings))
	for _, r := range rings {
		typ := r.name
		if samples[typ], totals[typ] = r.samples(); len(samples[typ]) == 0 {
			delete(samples, typ)
		}
	}
	out := make([]Latency, 0, len(samples))
	for typ, d := range samples {
		slices.Sort(d)
		out = append(out, Latency{
			Type: typ, Window: len(d), Total: totals[typ],
			P50: quantile(d, 0.50), P90: quantile(d, 0.90), P99: quantile(d, 0.99), Max: d[len(d)-1],
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// quantile is the nearest-rank q-quantile of sorted, non-empty d.
func quantile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// rolloutState is the newest change: when it was accepted and the type
// versions it introduced, bounded by the types times the groups of one
// fleet.
type rolloutState struct {
	at   time.Time
	keys map[acceptKey]bool
}

// maxPending bounds the streams a rollout lists as not done yet; the rest
// are counted.
const maxPending = 100

// Rollout is how far the newest change has got, per group, on this
// tracker's open streams.
type Rollout struct {
	// At is when the change was accepted (zero before the first).
	At     time.Time      `json:"at,omitzero"`
	Groups []GroupRollout `json:"groups"`
}

// GroupRollout is one group's progress. A stream takes part when it should
// hold a type version the change introduced; it is done once it has ACKed
// every such version, at the time of the last of those first ACKs.
type GroupRollout struct {
	Group string `json:"group"`
	// Total counts the streams taking part, Done those that are done.
	Total int `json:"total"`
	Done  int `json:"done"`
	// DoneAfter is, sorted, how long after At each done stream finished
	// (a stream that connected after At finishes when it ACKs).
	DoneAfter []time.Duration `json:"-"`
	// Pending lists streams not done yet (at most maxPending; PendingTotal
	// counts them all).
	Pending      []PendingStream `json:"pending"`
	PendingTotal int             `json:"pendingTotal"`
}

// PendingStream is a stream that has not ACKed the newest change, and the
// states of its types.
type PendingStream struct {
	Stream uint64            `json:"stream"`
	Node   string            `json:"node"`
	States map[string]string `json:"states"`
}

// noteChange records the type versions of a publish that were new, as the
// newest change. A publish that introduced nothing new (the same content
// again) leaves the newest change as it was. Called locked, with the
// accepted set not yet updated.
func (t *Tracker) noteChange(versions map[string][]string, at time.Time) {
	keys := map[acceptKey]bool{}
	accepted := *t.accepted.Load()
	for url, vs := range versions {
		for _, v := range vs {
			if k := (acceptKey{url, v}); v != "" {
				if _, known := accepted[k]; !known {
					keys[k] = true
				}
			}
		}
	}
	if len(keys) > 0 {
		t.change = rolloutState{at: at, keys: keys}
	}
}

// Rollout reports, per group, which open streams have ACKed the newest
// change and when. It walks the open streams: call it per page view, not
// per event.
func (t *Tracker) Rollout() Rollout {
	t.mu.Lock()
	change := t.change // its keys are replaced, never written
	t.mu.Unlock()
	out := Rollout{At: change.at, Groups: []GroupRollout{}}
	if len(change.keys) == 0 {
		return out
	}
	byGroup := map[string]*GroupRollout{}
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, s := range sh.streams {
			t.rolloutOf(s, change, byGroup, &buf)
		}
		sh.mu.Unlock()
	}
	for _, g := range byGroup {
		slices.Sort(g.DoneAfter)
		sort.Slice(g.Pending, func(i, j int) bool { return g.Pending[i].Node < g.Pending[j].Node })
		if len(g.Pending) > maxPending {
			g.Pending = g.Pending[:maxPending]
		}
		out.Groups = append(out.Groups, *g)
	}
	sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i].Group < out.Groups[j].Group })
	return out
}

// rolloutOf counts s, if open and in a group, in its group's progress
// through change.
func (t *Tracker) rolloutOf(s *stream, change rolloutState, byGroup map[string]*GroupRollout, buf *Stamps) {
	group := s.groupOf()
	if s.gone != nil || group == NoGroup {
		return
	}
	part, done, at := t.progress(s, change, buf)
	if !part {
		return
	}
	g := byGroup[group]
	if g == nil {
		g = &GroupRollout{Group: group, Pending: []PendingStream{}}
		byGroup[group] = g
	}
	g.Total++
	if done {
		g.Done++
		g.DoneAfter = append(g.DoneAfter, max(at.Sub(change.at), 0))
		return
	}
	g.PendingTotal++
	g.Pending = append(g.Pending, t.pending(s, buf))
}

// progress says whether s takes part in change, whether it is done, and
// when it finished.
func (t *Tracker) progress(s *stream, change rolloutState, buf *Stamps) (part, done bool, at time.Time) {
	done = true
	for i := range s.types {
		e := &s.types[i]
		p := t.stamps(s, e, buf)
		_, expected := t.state(s, e, p)
		set := expected
		if p.ExpectedSet != "" {
			set = p.ExpectedSet
		}
		if !change.keys[acceptKey{e.kind.url, set}] {
			continue
		}
		part = true
		if p.ACKed.At.IsZero() || p.ACKed.Version != expected {
			done = false
			continue
		}
		if p.ACKedSince.After(at) {
			at = p.ACKedSince
		}
	}
	return part, done, at
}

// pending is s as a stream the rollout waits for.
func (t *Tracker) pending(s *stream, buf *Stamps) PendingStream {
	p := PendingStream{Stream: s.id, Node: s.node, States: map[string]string{}}
	for i := range s.types {
		e := &s.types[i]
		state, _ := t.state(s, e, t.stamps(s, e, buf))
		p.States[e.kind.name] = stateNames[state]
	}
	return p
}
