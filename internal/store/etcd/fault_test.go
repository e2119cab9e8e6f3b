package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pylon-xds/pylon/internal/store"
)

// TestUnreachable: with etcd stopped, every call fails within its timeout
// with store.ErrUnavailable and says "etcd unreachable"; a write says its
// outcome is unknown. Opening a store on a dead endpoint fails the same
// way.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	const timeout = 500 * time.Millisecond
	s := open(t, ms, "/down", timeout)
	k := store.Key{Kind: "services", Name: "web"}
	if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`)}}, &store.Entry{}, 10); err != nil {
		t.Fatal(err)
	}
	ms[0].stop()
	calls := map[string]func() error{
		"list":    func() error { _, _, err := s.List(ctx); return err },
		"get":     func() error { _, err := s.Get(ctx, k); return err },
		"history": func() error { _, err := s.History(ctx); return err },
		"at":      func() error { _, err := s.At(ctx, 1); return err },
		"commit": func() error {
			_, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`2`)}}, &store.Entry{}, 10)
			return err
		},
		"touch": func() error { return s.Touch(ctx, k, time.Now().Add(time.Minute)) },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "etcd unreachable at "+ms[0].cli) {
			t.Errorf("%s with etcd down: %v", name, err)
		}
		// A commit reads, then writes: at most a few timeouts.
		if took > 4*timeout {
			t.Errorf("%s took %v with a %v timeout", name, took, timeout)
		}
	}
	_, err := Open(ctx, Options{Endpoints: []string{ms[0].cli}, Prefix: "/down", Timeout: timeout})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("opening on a stopped etcd: %v", err)
	}
}

// TestWriteOutcomeUnknownSaysSo: the error of a write whose answer was
// lost tells the operator to read before retrying.
func TestWriteOutcomeUnknownSaysSo(t *testing.T) {
	err := (&Store{where: "127.0.0.1:1"}).failWrite("commit", context.DeadlineExceeded, true)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "may or may not have been applied") {
		t.Fatalf("%v", err)
	}
	if err := (&Store{}).fail("list", context.Canceled); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a caller's cancellation became %v", err)
	}
}

// TestLeaderLoss: three members on loopback, a replica writing through
// all three endpoints, and the leader killed mid-stream (raft halted
// without handing over leadership, so the others must notice and elect).
// Each write either succeeds or fails with store.ErrUnavailable; writes go
// on once a new leader is elected; afterwards every acknowledged write is
// there, at the revision it was acknowledged with, on a store opened anew.
func TestLeaderLoss(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 3)
	s := open(t, ms, "/ha", 2*time.Second)
	acked := map[store.Key]int64{}
	write := func(i int) error {
		k := store.Key{Kind: "services", Name: fmt.Sprint("s", i)}
		rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, `%d`, i), Revision: -1}}, &store.Entry{Summary: k.Name}, 0)
		if err == nil {
			acked[k] = rev
		}
		return err
	}
	i := 0
	for ; i < 20; i++ {
		if err := write(i); err != nil {
			t.Fatal(err)
		}
	}
	// The leader stops while writes are in flight.
	leader := leaderOf(t, ms)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		leader.kill()
	}()
	deadline := time.Now().Add(30 * time.Second)
	var unavailable int
	for during := true; during; i++ {
		select {
		case <-stopped:
			during = false
		default:
		}
		if time.Now().After(deadline) || i > 1000 {
			t.Fatal("the leader did not stop")
		}
		switch err := write(i); {
		case errors.Is(err, store.ErrUnavailable):
			unavailable++
		case err != nil:
			t.Fatalf("write %d while the leader stopped: %v", i, err)
		}
	}
	// Then until 20 more writes have succeeded, bounded in count and
	// time.
	for ok := 0; ok < 20; i++ {
		if time.Now().After(deadline) || i > 1000 {
			t.Fatalf("only %d writes succeeded after the leader stopped (%d unavailable)", ok, unavailable)
		}
		switch err := write(i); {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrUnavailable):
			unavailable++
		default:
			t.Fatalf("write %d during the failover: %v", i, err)
		}
	}
	t.Logf("%d writes, %d refused as unavailable during the election", i, unavailable)
	var live []*member
	for _, m := range ms {
		if m.etcd != nil {
			live = append(live, m)
		}
	}
	fresh := open(t, live, "/ha", 2*time.Second)
	for k, rev := range acked {
		o, err := fresh.Get(ctx, k)
		if err != nil || o.Revision != rev {
			t.Errorf("acknowledged %s/%s at %d: now %+v %v", k.Kind, k.Name, rev, o, err)
		}
	}
	h, err := fresh.History(ctx)
	if err != nil || len(h) < len(acked) {
		t.Fatalf("history: %d entries for %d acknowledged writes (%v)", len(h), len(acked), err)
	}
}

// leaderOf returns the member that leads, once one does.
func leaderOf(t *testing.T, ms []*member) *member {
	t.Helper()
	var leader *member
	waitFor(t, 10*time.Second, "a leader", func() bool {
		for _, m := range ms {
			if m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

// TestWatchResumesAcrossRestart: a replica's watch outlives etcd going
// away; a commit made once etcd is back (through another replica)
// reaches it, and its calls work again without reopening the store.
func TestWatchResumesAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/restart", time.Second), open(t, ms, "/restart", time.Second)
	k := store.Key{Kind: "services", Name: "web"}
	rev, err := a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	events := b.Watch(ctx, rev)
	ms[0].stop()
	if _, _, err := b.List(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("list with etcd down: %v", err)
	}
	ms[0].start(t, false)
	ms[0].ready(t)
	var again int64
	waitFor(t, 10*time.Second, "a commit once etcd is back", func() bool {
		again, err = a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`2`)}}, nil, 10)
		return err == nil
	})
	select {
	case got := <-events:
		if got != again {
			t.Fatalf("watched revision %d, committed %d", got, again)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not resume after etcd restarted")
	}
	if o, err := b.Get(ctx, k); err != nil || string(o.Body) != "2" {
		t.Fatalf("reading after the restart: %+v %v", o, err)
	}
}

// TestWatchAfterCompaction: a watch from a revision etcd has compacted
// away cannot replay it; it sends the current revision, so the receiver
// re-reads the store, and goes on from there.
func TestWatchAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	s := open(t, ms, "/compact", 0)
	k := store.Key{Kind: "services", Name: "web"}
	var last int64
	for i := range 5 {
		rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, "%d", i)}}, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		last = rev
	}
	if _, err := s.cli.Compact(ctx, last+s.Base(), clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	events := s.Watch(ctx, 1)
	select {
	case got := <-events:
		if got < last {
			t.Fatalf("after compaction the watch sent %d, before the current %d", got, last)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing sent for a compacted start")
	}
	next, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`"after"`)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the commit after compaction on the watch", func() bool {
		select {
		case got := <-events:
			return got == next
		default:
			return false
		}
	})
}
