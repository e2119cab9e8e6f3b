package configstore

import (
	"context"
	"errors"
	"sync"

	"github.com/pylon-xds/pylon/internal/store"
)

// maxGroupChanges bounds the changes one grouped commit carries: etcd
// refuses a transaction of more than 128 operations by default, and a
// bolt transaction holds its writes in memory until it commits.
const maxGroupChanges = 100

// group gathers concurrent runtime writes (registrations,
// deregistrations, lease expiries) into one store commit: one fsync (one
// etcd transaction) for many writers, so that registration throughput is
// bounded by the disk and not by one fsync per call. There is no timed
// window: the writes that queue while one commit runs form the next one,
// so a lone write on a quiet system is committed at once, and under load
// the batches grow as long as the store is slow.
//
// The first writer to find no commit under way leads: it commits a batch
// (its own write and whatever queued meanwhile), hands each writer its
// result, and hands the lead to the first writer still queued. Nobody
// leads for longer than its own batch, so a registrant's call is never
// held for other registrants' batches.
type group struct {
	mu      sync.Mutex // guards queue and leading
	queue   []*groupWrite
	leading bool
}

// groupWrite is one caller's changes and where its outcome goes.
type groupWrite struct {
	changes []store.Change
	done    chan groupDone // one slot: the sender never waits
}

// groupDone is a write's outcome, or lead: the write is still queued and
// its caller now leads the next batch.
type groupDone struct {
	rev  int64
	err  error
	lead bool
}

// commitRuntime stores endpoint changes without a history entry, grouped
// with concurrent callers' changes into as few commits as the store's
// speed allows. Each caller gets its own outcome; a change the store
// refuses (a conflict) fails only its caller's write.
func (s *Service) commitRuntime(ctx context.Context, changes []store.Change) (Result, error) {
	w := &groupWrite{changes: changes, done: make(chan groupDone, 1)}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	for {
		if lead {
			s.leadGroup(ctx)
		}
		// A leader's batch always holds its own write (it is first in the
		// queue), so after leading, done is already filled.
		d := <-w.done
		if !d.lead {
			if d.err != nil {
				return Result{}, d.err
			}
			return Result{Revision: d.rev}, nil
		}
		lead = true
	}
}

// leadGroup commits one batch from the head of the queue, answers its
// writers and passes the lead on.
func (s *Service) leadGroup(ctx context.Context) {
	g := &s.group
	g.mu.Lock()
	batch := takeBatch(&g.queue)
	g.mu.Unlock()
	// The batch holds other callers' writes: one caller giving up
	// (its request cancelled) must not fail theirs. The store bounds its
	// own calls (etcd's request timeout; bolt is local).
	s.commitBatch(context.WithoutCancel(ctx), batch)
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- groupDone{lead: true}
	} else {
		g.leading = false
	}
	g.mu.Unlock()
}

// takeBatch removes from the head of queue the writes of the next commit:
// at least one, at most maxGroupChanges changes, and no key twice (etcd
// refuses a transaction naming a key twice; the later write goes in the
// next commit, after the earlier one, as its caller expects).
func takeBatch(queue *[]*groupWrite) []*groupWrite {
	q := *queue
	keys := map[store.Key]bool{}
	n, changes := 0, 0
	for ; n < len(q); n++ {
		w := q[n]
		if n > 0 && changes+len(w.changes) > maxGroupChanges {
			break
		}
		clash := false
		for _, c := range w.changes {
			clash = clash || keys[c.Key]
		}
		if n > 0 && clash {
			break
		}
		for _, c := range w.changes {
			keys[c.Key] = true
		}
		changes += len(w.changes)
	}
	batch := q[:n:n]
	*queue = append([]*groupWrite(nil), q[n:]...)
	return batch
}

// commitBatch commits the batch's changes as one transaction. If the
// store refuses it for a reason one write can cause (a conflict on a
// revision that write named), each write is committed alone, so that only
// the writes the store refuses fail. A store that cannot be reached fails
// them all at once: retrying each would only wait out its timeout again.
func (s *Service) commitBatch(ctx context.Context, batch []*groupWrite) {
	var all []store.Change
	for _, w := range batch {
		all = append(all, w.changes...)
	}
	s.mu.Lock()
	rev, err := s.st.Commit(ctx, all, nil, s.opts.Keep)
	stored := err == nil
	if err != nil && len(batch) > 1 && !errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
		for _, w := range batch {
			rev, err := s.st.Commit(ctx, w.changes, nil, s.opts.Keep)
			stored = stored || err == nil
			w.done <- groupDone{rev: rev, err: err}
		}
		batch = nil
	}
	s.mu.Unlock()
	for _, w := range batch {
		w.done <- groupDone{rev: rev, err: err}
	}
	if stored {
		s.changed()
	}
}
