package bolt

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/store"
)

// maxTouchGroup bounds the renewals one transaction takes, so that one
// commit's time (and the wait of those queued behind it) stays bounded.
const maxTouchGroup = 1000

// touchReq is one renewal waiting for a commit. wake says, once, whether
// its commit is done (false) or it leads the next one (true).
type touchReq struct {
	k       store.Key
	expires time.Time
	err     error
	wake    chan bool
}

// toucher groups concurrent renewals into one transaction and one fsync
// without a fixed delay: a renewal with no commit under way commits at
// once (alone); those that arrive during a commit queue, and the first of
// them leads the next commit, of all queued then. bbolt's Batch would hold
// every lone renewal for its MaxBatchDelay (10 ms): a single renewer
// managed 89 renewals a second through it, 3,752 through this
// (BenchmarkRegistrations/renew/registrants=1 in internal/configstore,
// docs/BENCHMARKS.md). Leadership passes on after
// each commit, so no caller waits for more than its own group and the one
// before it.
type toucher struct {
	mu      sync.Mutex
	queue   []*touchReq
	leading bool
	// commits counts the transactions, for tests.
	commits int
}

// touch queues r and returns once its commit is done.
func (t *toucher) touch(db *bbolt.DB, r *touchReq) error {
	t.mu.Lock()
	t.queue = append(t.queue, r)
	if t.leading {
		t.mu.Unlock()
		if lead := <-r.wake; !lead {
			return r.err
		}
		t.lead(db)
		return r.err
	}
	t.leading = true
	t.mu.Unlock()
	t.lead(db)
	return r.err
}

// lead commits the queue's first group (which holds the leader) and hands
// the lead to the next queued renewal, if any.
func (t *toucher) lead(db *bbolt.DB) {
	t.mu.Lock()
	n := min(len(t.queue), maxTouchGroup)
	group := t.queue[:n:n]
	t.queue = t.queue[n:]
	t.commits++
	t.mu.Unlock()
	commitTouches(db, group)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		t.queue, t.leading = nil, false
		return
	}
	t.queue[0].wake <- true
}

// commitTouches renews every lease of group in one transaction. A renewal
// of a missing object fails alone; a failed commit fails them all. Each
// renewal but the leader's (which is not waiting) is woken as done.
func commitTouches(db *bbolt.DB, group []*touchReq) {
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, r := range group {
			r.err = renew(tx, r.k, r.expires)
		}
		return nil
	})
	for _, r := range group {
		if err != nil {
			r.err = err
		}
		select {
		case r.wake <- false:
		default:
		}
	}
}

// renew sets one object's lease expiry in tx: the record changes, not
// the version.
func renew(tx *bbolt.Tx, k store.Key, expires time.Time) error {
	m, ok, err := current(tx, k)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrNotFound
	}
	m.Expires = expires
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return tx.Bucket(objectsBucket).Put(objectKey(k), v)
}

// Touch renews a lease in place: the record changes, not the version.
// Concurrent renewals share a transaction (toucher).
func (s *Store) Touch(ctx context.Context, k store.Key, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.touches.touch(s.db, &touchReq{k: k, expires: expires, wake: make(chan bool, 1)})
}
