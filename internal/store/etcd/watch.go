package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch backoff after a broken watch: etcd restarting or unreachable.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Watch sends the store revision of each change to the objects after
// fromRev (a commit, a lease expiring) until ctx ends, then closes the
// channel. The watch requires a leader: a member cut off from the quorum
// ends it instead of going quiet, and it is opened again (on any
// endpoint) from the last revision seen, so nothing is missed. When etcd
// compacted past that revision, the current revision is sent: the
// receiver re-reads everything anyway. Closing the store ends the watch
// too.
func (s *Store) Watch(ctx context.Context, fromRev int64) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		defer close(out)
		s.watch(ctx, fromRev, out)
	}()
	return out
}

// send replaces what the receiver has not taken yet with rev: only the
// newest revision matters. Only the watch goroutine sends, so after the
// drain there is room.
func send(out chan int64, rev int64) {
	select {
	case <-out:
	default:
	}
	out <- rev
}

func (s *Store) watch(ctx context.Context, fromRev int64, out chan int64) {
	next := fromRev + s.base + 1 // the first etcd revision not yet seen
	wait := watchRetryMin
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := s.cli.Watch(wctx, s.objPrefix(), clientv3.WithPrefix(), clientv3.WithRev(next))
		for resp := range ch {
			if resp.CompactRevision != 0 {
				// Changes between next and the compaction are gone
				// (the response carries no current revision): say the
				// store changed as of now, and go on from there.
				if now, err := s.read(ctx, "watching", clientv3.OpGet(s.metaKey(), clientv3.WithCountOnly())); err == nil {
					next = now.Header.Revision + 1
					send(out, now.Header.Revision-s.base)
					wait = 0
				}
				break
			}
			if resp.Err() != nil {
				break
			}
			wait = watchRetryMin
			if n := len(resp.Events); n > 0 {
				rev := resp.Events[n-1].Kv.ModRevision
				next = rev + 1
				send(out, rev-s.base)
			}
		}
		cancel()
		if ctx.Err() != nil || s.cli.Ctx().Err() != nil {
			return // done, or the store was closed
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(max(2*wait, watchRetryMin), watchRetryMax)
	}
}
