package status

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// Push latency, the time from a change's acceptance to each proxy's first
// ACK of it, harvested from the live streams when it is read and kept per
// type in a bounded window; and the time from a stream's open to each
// type's first sync.

// acceptKey is a type URL and a version of it.
type acceptKey struct{ url, version string }

// maxAccepted bounds the versions remembered for push latency.
const maxAccepted = 4096

// Published records that versions (type URL -> version) were accepted at
// at, so that ACKs of them measure push latency.
func (t *Tracker) Published(versions map[string][]string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteChange(versions, at)
	old := *t.accepted.Load()
	var next map[acceptKey]time.Time
	for url, vs := range versions {
		for _, v := range vs {
			k := acceptKey{url, v}
			if _, ok := old[k]; ok {
				continue
			}
			if next == nil {
				next = maps.Clone(old)
			}
			if _, ok := next[k]; ok {
				continue
			}
			next[k] = at
			t.order = append(t.order, k)
		}
	}
	if next == nil {
		return
	}
	for len(t.order) > maxAccepted {
		delete(next, t.order[0])
		t.order = t.order[1:]
	}
	t.accepted.Store(&next)
}

// measure takes the first ACK on stream id, open since since, of a version
// (st.Set, or else st.Version) of typeURL, sent at sent: if its change was
// accepted (or released to more nodes by a rollout stage: from) after the
// stream opened, this is the push of a change, and its latency is kept
// and told (Options.OnLatency). Harvest calls it for a live
// stream's newest. It takes no lock.
func (t *Tracker) measure(id uint64, typeURL string, st Stamp, sent, since time.Time) {
	key := st.Version
	if st.Set != "" {
		key = st.Set
	}
	k := acceptKey{typeURL, key}
	accepted, known := (*t.accepted.Load())[k]
	if !known {
		return
	}
	if accepted = t.from(k, accepted, sent); !accepted.After(since) {
		return
	}
	d := st.At.Sub(accepted)
	r := t.latency.Load()[typeURL]
	if r == nil {
		// Kinds are bounded (maxKinds), and so are their URLs.
		r = t.latency.LoadOrStore(typeURL, &ring{name: t.opts.Abbrev(typeURL)}, maxKinds)
	}
	r.add(id, st.At, d)
	if t.opts.OnLatency != nil {
		t.opts.OnLatency(r.name, d)
	}
}

// Harvest measures the push latency (measure) of every version the live
// streams took since the last harvest: each type's newest, as its stream
// keeps it (Stamps.ACKedSince). Whoever reads push latency calls it first:
// Latencies, and the metrics at a scrape. Measured on the ACK instead,
// every stream's ACK of every change paid for an event, the lookup of the
// change and two counters both cores write, which showed in the CPU
// profile of the fleet benchmark's delta EDS change at 10,000 streams
// (bench/fleet -ab -delta -n 10000 -clusters 100 -eds 100 -profile DIR;
// docs/benchmarks-log.md, "Push latency harvested when read"); a harvest
// walks the streams once per read. What
// it gives up: a stream that took several versions of a type between two
// reads counts the newest only, and a version whose acceptance the tracker
// no longer remembers (maxAccepted: the newest 4,096 versions, of
// all types and groups together) by the next read is not measured. A stream that ends is
// harvested as it ends.
func (t *Tracker) Harvest() {
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, s := range sh.streams {
			if s.live == nil {
				continue
			}
			for i := range s.types {
				e := &s.types[i]
				t.harvest(s, e, t.stamps(s, e, &buf))
			}
		}
		sh.mu.Unlock()
	}
}

// harvest measures the push latency of e's version on live stream s, from
// its stamps p, if it was not yet. Call with s's shard locked.
func (t *Tracker) harvest(s *stream, e *entry, p *Stamps) {
	if p.ACKedSince.IsZero() {
		return
	}
	// Changed, not later: ACKedSince moves only when the stream takes
	// another version, and a wall clock stepped back must not hide the
	// versions after it.
	since := p.ACKedSince.UnixNano()
	if since == e.measured {
		return
	}
	e.measured = since
	// When the version was sent: the last response's time if it carried
	// it, else no later than the ACK. A release after it (a later stage)
	// does not shorten this push.
	sent := p.ACKedSince
	if p.Sent.Version == p.ACKed.Version && !p.Sent.At.IsZero() && p.Sent.At.Before(sent) {
		sent = p.Sent.At
	}
	t.measure(s.id, e.kind.url, Stamp{Version: p.ACKed.Version, Set: p.ACKed.Set, At: p.ACKedSince}, sent, s.since)
}

// latencySamples is how many recent push latencies are kept per type: a
// fixed window, so that percentiles describe the last few changes and the
// memory does not grow with the fleet's history.
const latencySamples = 1024

// ring holds the newest latencySamples durations. Harvests add them (two
// readers harvest at once, each under a different shard's lock), and so
// do streams as they end (freeze): a slot is claimed by an
// atomic count and written atomically, so adding takes no lock of its
// own. (When every ACK of the fleet added its sample, the sample's lock
// and lookup showed in the CPU profile of the fleet benchmark's route
// change, bench/fleet -n 5000 -routes 30 -profile DIR: Tracker.pushed in
// docs/benchmarks-log.md, issue 18's fifth pass.) A
// reader racing an add may see the slot's previous sample, or, while the
// ring fills, a slot claimed and not yet written: slots hold a
// sample plus one, so such a slot reads 0 and is left out rather than
// taken for a latency of 0.
//
// The slots are in shards, by stream: one count that both cores added to
// for every stream's ACK showed in the CPU profile of the fleet
// benchmark's EDS change (bench/fleet -delta -n 5000 -clusters 100
// -eds 100 -impl pylon-unobserved,pylon -profile DIR, read with pprof's
// -diff_base; docs/benchmarks-log.md, issue 18's sixth pass). Each
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

// maxReleases bounds the releases kept per version: a rollout has at most
// 16 stages, and a halted one may resume as often as an operator likes.
const maxReleases = 32

// Released records that versions (type URL -> version), accepted before
// and held back by a staged rollout from some nodes of their group, reach
// more of them from at: a stage starts, a halted rollout resumes, or the
// rollout completes. A node sent such a version at or after at measures
// its push latency from at, not from the change's acceptance: the time
// the version was held back from it (a stage's bake) is the rollout's,
// not the push's. Versions the tracker does not remember as accepted are
// ignored.
func (t *Tracker) Released(versions map[string][]string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	accepted := *t.accepted.Load()
	old := t.releases()
	next := make(map[acceptKey][]time.Time, len(old)+1)
	for k, ts := range old {
		// A version forgotten as accepted is never measured again.
		if _, ok := accepted[k]; ok {
			next[k] = ts
		}
	}
	for url, vs := range versions {
		for _, v := range vs {
			k := acceptKey{url, v}
			if _, ok := accepted[k]; !ok {
				continue
			}
			ts := append(slices.Clip(next[k]), at)
			next[k] = ts[max(0, len(ts)-maxReleases):]
		}
	}
	t.released.Store(&next)
}

// releases is the released map; nil until the first release.
func (t *Tracker) releases() map[acceptKey][]time.Time {
	if p := t.released.Load(); p != nil {
		return *p
	}
	return nil
}

// from is when a push of version k sent at sent started: its acceptance,
// or the newest release of it at or before sent (Released).
func (t *Tracker) from(k acceptKey, accepted, sent time.Time) time.Time {
	for _, r := range t.releases()[k] {
		if r.After(accepted) && !r.After(sent) {
			accepted = r
		}
	}
	return accepted
}
