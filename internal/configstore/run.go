package configstore

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/store"
)

// changed wakes Run to send the pipeline an update (coalesced).
func (s *Service) changed() {
	select {
	case s.notify <- s.opts.Now():
	default:
	}
}

// Run sends the pipeline the stored config at the start, after every commit
// (bursts batched at a pace that follows the pipeline's cost: see pace)
// and when a lease expires, until ctx ends.
//
// On a shared store (one that implements store.Watcher: etcd) it also
// watches the store, so that a commit through another replica, or a lease
// etcd expired, reaches this replica's pipeline as its own commits do.
// While the store is unreachable nothing is sent (the pipeline keeps the
// last good config; an error update would only be refused) and the
// stored config is read again every Probe until it answers.
func (s *Service) Run(ctx context.Context, out chan<- source.Update) error {
	r := &runner{s: s, out: out, pace: pace{min: s.opts.Debounce, spacing: s.opts.Spacing}}
	r.watcher, _ = s.opts.Store.(store.Watcher)
	le, ok := s.opts.Store.(leaseExpirer)
	r.expires = !ok || !le.ExpiresLeases()
	wctx, stopWatch := context.WithCancel(ctx)
	defer func() {
		// The watch's goroutine is this Run's: wait until it is gone.
		stopWatch()
		if r.events != nil {
			for range r.events {
			}
		}
	}()
	if !r.sync(wctx, s.opts.Now()) {
		return nil
	}
	tick := time.NewTicker(s.opts.Probe)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case at := <-s.notify:
			if !r.debounced(wctx, at) {
				return nil
			}
		case rev, ok := <-r.events:
			if !ok {
				// The watch ends with ctx, or when the store is
				// closed under a running service.
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("configstore: the store's watch ended while the service runs (store closed?)")
			}
			if rev > r.sent && !r.debounced(wctx, s.opts.Now()) {
				return nil
			}
		case <-tick.C:
			if !r.tick(wctx) {
				return nil
			}
		}
	}
}

// runner is Run's state, owned by its goroutine.
type runner struct {
	s       *Service
	out     chan<- source.Update
	watcher store.Watcher // nil: a store only this process writes
	expires bool          // the service expires leases (the store does not)
	events  <-chan int64  // the watch, once the first read succeeded
	sent    int64         // the store revision of the last update sent
	behind  bool          // the last read failed: read again on the next tick
	// leased is when each leased object of the last read expires, to
	// log the leases a store that expires them itself dropped.
	leased map[store.Key]time.Time
	pace   pace
	// started: the update at start was sent.
	started bool
	// rendered keeps the objects' files for the next read.
	rendered rendered
	// stored is, on a store only this process writes (no watcher),
	// every object as of the last read, in the store's order (kind, then
	// name), kept up to date from the keys the service wrote since (see
	// written); nil: read them all again.
	stored []store.Object
}

// written collects the keys the service wrote (committed, renewed) since
// the runner last took them. On a store only this process writes (bolt:
// one writer, locked to this process), a publish then reads those keys
// again rather than every stored object: under registration churn one
// hot service holds thousands of endpoints and a publish carries a few
// hundred new ones. A key is noted after its write returns, so a read
// that follows taking it sees the write; a write noted after the take
// is read again at the next publish. Past maxReread keys it notes only
// that there were more (a service that no runner takes them from holds
// no more).
type written struct {
	mu   sync.Mutex
	keys map[store.Key]struct{}
	more bool // past maxReread: read everything
}

func (w *written) mark(changes []store.Change) {
	if w == nil || len(changes) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.more {
		return
	}
	if w.keys == nil {
		w.keys = map[store.Key]struct{}{}
	}
	for _, c := range changes {
		w.keys[c.Key] = struct{}{}
	}
	if len(w.keys) > maxReread {
		w.keys, w.more = nil, true
	}
}

func (w *written) markKey(k store.Key) {
	w.mark([]store.Change{{Key: k}})
}

// take returns the keys noted so far, or all: more than maxReread, and
// starts a new set.
func (w *written) take() (keys map[store.Key]struct{}, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys, all = w.keys, w.more
	w.keys, w.more = nil, false
	return keys, all
}

// maxReread bounds the keys a publish reads one by one; past it, reading
// every object at once is cheaper.
const maxReread = 4096

// read returns every stored object, in the store's order. With stored
// kept, it reads only the keys written since the last read; otherwise (a
// shared store, which other replicas write, or after a failed read) it
// lists the store. A read that fails drops stored: the next lists again.
func (r *runner) read(ctx context.Context) ([]store.Object, int64, error) {
	keys, all := r.s.written.take()
	if r.stored == nil || all {
		objs, rev, err := r.s.st.List(ctx)
		r.stored = nil
		if err == nil && r.watcher == nil {
			r.stored = slices.Clone(objs)
			slices.SortFunc(r.stored, byKey)
		}
		return objs, rev, err
	}
	var added []store.Object
	var removed []int // indexes into stored, which keeps its order until all are found
	for k := range keys {
		o, err := r.s.st.Get(ctx, k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			r.stored = nil
			return nil, 0, err
		}
		i, found := slices.BinarySearchFunc(r.stored, k, func(o store.Object, k store.Key) int { return compareKeys(o.Key, k) })
		switch {
		case err != nil && found:
			removed = append(removed, i)
		case err != nil:
		case found:
			r.stored[i] = o
		default:
			added = append(added, o)
		}
	}
	if len(removed) > 0 {
		slices.Sort(removed)
		kept := r.stored[:removed[0]]
		for j, i := range removed {
			end := len(r.stored)
			if j+1 < len(removed) {
				end = removed[j+1]
			}
			kept = append(kept, r.stored[i+1:end]...)
		}
		clear(r.stored[len(kept):])
		r.stored = kept
	}
	if len(added) > 0 {
		slices.SortFunc(added, byKey)
		r.stored = mergeSorted(r.stored, added)
	}
	// Not copied: the caller only reads it (rendered.files sorts what is
	// not sorted already), before the next read changes it. The revision
	// is the last sent: revisions are compared only with a watched
	// store's events, and a watched store is always listed.
	return r.stored, r.sent, nil
}

// compareKeys orders keys as the store lists them: by kind, then name.
func compareKeys(a, b store.Key) int {
	return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}

func byKey(a, b store.Object) int { return compareKeys(a.Key, b.Key) }

// mergeSorted merges b into a, both sorted by key and none in both, in
// place from the back: a grows into its spare room (appended to, so that
// the room grows with it) rather than being copied whole each time.
func mergeSorted(a, b []store.Object) []store.Object {
	i, j := len(a)-1, len(b)-1
	a = append(a, b...) // the room; b's copy in it is overwritten below
	for k := len(a) - 1; j >= 0; k-- {
		if i >= 0 && byKey(a[i], b[j]) > 0 {
			a[k] = a[i]
			i--
		} else {
			a[k] = b[j]
			j--
		}
	}
	return a
}

// debounced sends the writes so far as one update: at once when the
// pipeline has been idle for a while (a lone registration is not held
// back), otherwise when the pace allows (see pace), folding every write
// that lands meanwhile into the one update.
func (r *runner) debounced(ctx context.Context, at time.Time) bool {
	if wait := r.pace.next().Sub(r.s.opts.Now()); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
	return r.sync(ctx, at)
}

// maxPace bounds the spacing between updates, whatever the pipeline's
// cost seemed to be.
const maxPace = 5 * time.Second

// pace spaces the updates sent to the pipeline so that, under sustained
// churn, their rate follows the pipeline's own cost: the pipeline takes
// an update only when it finished the previous one (the channel has no
// buffer), so a send that had to wait measures how long the pipeline
// spent on the previous update. The next read of the store is timed to
// when the pipeline is expected to be free again, so that what it
// compiles is as fresh as it can be (latest wins) and no stale update
// queues behind a running compile. Updates are at least min apart
// (Options.Debounce), at most one per min while the pipeline is cheap;
// a write after a quiet spell goes out at once.
//
// spacing (Options.Spacing), when longer, replaces min: the pipeline's
// cost ends when it has published, but each publish under churn is then
// a response to every proxy it reaches. At 10,000 proxies and 1,000
// registrations a second, updates min apart (after a compile of a few
// tens of ms) sent each proxy 2 EDS responses a second, which kept the
// machine's cores busy and the changes waiting 7 s (p50); a second apart,
// 0.9 responses a second and 1.2 s (docs/benchmarks-log.md, "the publish
// pace under churn").
type pace struct {
	min     time.Duration
	spacing func() time.Duration // nil: min
	cost    time.Duration        // the pipeline's time per update, as last seen
	done    time.Time            // when the last update was handed over
}

// next is the earliest time the next update may be read.
func (p *pace) next() time.Time {
	if p.done.IsZero() {
		return time.Time{}
	}
	least := p.min
	if p.spacing != nil {
		least = max(least, min(p.spacing(), maxPace))
	}
	return p.done.Add(max(least, p.cost))
}

// handed records a handoff: the send began at start and the pipeline
// took the update at now. A send that waited (more than a millisecond)
// found the pipeline busy with the previous update since done; one that
// did not says the pipeline keeps up, and the estimate decays.
func (p *pace) handed(start, now time.Time) {
	if now.Sub(start) > time.Millisecond && !p.done.IsZero() {
		p.cost = min(now.Sub(p.done), maxPace)
	} else {
		p.cost /= 2
	}
	p.done = now
}

// tick runs the periodic work: catching up after a failed read, checking
// that a shared store answers, expiring leases the store does not.
func (r *runner) tick(ctx context.Context) bool {
	if r.behind {
		return r.sync(ctx, r.s.opts.Now())
	}
	if r.watcher != nil {
		// A cheap read: its outcome is all Degraded needs. When it
		// fails, the next tick reads the whole config again.
		_, err := r.s.st.Get(ctx, GroupsKey)
		r.behind = errors.Is(err, store.ErrUnavailable)
	}
	if r.expires && !r.behind {
		if err := r.s.expire(ctx); err != nil && ctx.Err() == nil {
			r.s.log.Warn("expiring endpoint leases", "err", scrub(err))
		}
	}
	return true
}

// sync reads the stored config and sends it to the pipeline; it returns
// false when ctx ended. A store that cannot be reached sends nothing: the
// pipeline keeps serving the last good config, and the next tick reads
// again. The first successful read starts the watch from its revision.
func (r *runner) sync(ctx context.Context, at time.Time) bool {
	select {
	case <-r.s.notify: // a write before this read: it is in this update
	default:
	}
	objs, rev, err := r.read(ctx)
	r.behind = errors.Is(err, store.ErrUnavailable)
	if r.behind || ctx.Err() != nil {
		return ctx.Err() == nil
	}
	var files []config.File
	if err == nil {
		if !r.expires {
			r.noteExpired(objs)
		}
		files, err = r.rendered.files(objs, r.s.opts.Now())
	}
	start := r.s.opts.Now()
	select {
	case r.out <- source.Update{Files: files, Err: scrub(err), AcceptedAt: at}:
	case <-ctx.Done():
		return false
	}
	if r.started {
		r.pace.handed(start, r.s.opts.Now())
	}
	// The update at start paces nothing: the first write after it
	// goes out at once.
	r.started = true
	if err == nil {
		r.sent = max(r.sent, rev)
		if r.watcher != nil && r.events == nil {
			r.events = r.watcher.Watch(ctx, rev)
		}
	}
	return true
}

// noteExpired logs the leases the store dropped since the last read
// because they ran out. On a store that expires leases itself (etcd) the
// service runs no expiry of its own to log them, and an endpoint that left
// EDS without a deregistration is the first thing an operator looks for
// when traffic to an instance stops. Every replica logs it: each says what
// its own proxies lost. A lease removed before its time (a deregistration)
// is not logged.
func (r *runner) noteExpired(objs []store.Object) {
	now := r.s.opts.Now()
	next := make(map[store.Key]time.Time, len(r.leased))
	for _, o := range objs {
		if !o.Expires.IsZero() {
			next[o.Key] = o.Expires
		}
	}
	for k, expires := range r.leased {
		if _, kept := next[k]; !kept && !expires.After(now) {
			r.s.logExpired(k, now)
		}
	}
	r.leased = next
	r.s.leases.keepOnly(objs)
}
