package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// etcd's peer transport (rafthttp, in the embedded servers)
		// leaves the keep-alive HTTP connections between the members of
		// a stopped three-member cluster open: the pooled client halves
		// (persistConn's loops) and the server halves serving them. They
		// are etcd's, between its own members; this package speaks only
		// gRPC to etcd and starts no HTTP, so ignoring these frames hides
		// nothing of its own. Every other goroutine, etcd's included, is
		// checked.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}

// open opens a store on ms under prefix, closed when t ends.
func open(t *testing.T, ms []*member, prefix string, timeout time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Endpoints: endpoints(ms), Prefix: prefix, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the shared store suite on one embedded etcd, each
// case under a prefix of its own (a fresh store), reopened under the same
// prefix for the durability checks; in clear and sealed (encryption at
// rest).
func TestConformance(t *testing.T) {
	ms := startCluster(t, 1)
	t.Run("clear", func(t *testing.T) { storetest.Run(t, newBackend(ms, nil).reopen) })
	t.Run("sealed", func(t *testing.T) { storetest.Run(t, newBackend(ms, storetest.NewKeyring(t, "k1")).reopen) })
}

// backend opens one store per test, under a prefix named after it, again
// on reopen.
type backend struct {
	ms     []*member
	ring   *seal.Keyring
	opened map[string]*Store
}

func newBackend(ms []*member, ring *seal.Keyring) *backend {
	return &backend{ms: ms, ring: ring, opened: map[string]*Store{}}
}

func (b *backend) reopen(t *testing.T, reopen bool) store.Store { return b.open(t, b.ring, reopen) }

func (b *backend) open(t *testing.T, ring *seal.Keyring, reopen bool) store.Store {
	t.Helper()
	if s := b.opened[t.Name()]; reopen && s != nil {
		s.Close()
	}
	s, err := Open(context.Background(), Options{Endpoints: endpoints(b.ms), Prefix: "/conformance/" + t.Name(), Seal: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b.opened[t.Name()] = s
	return s
}

// raw is every key and value under the test's prefix, as etcdctl get
// --prefix would show them.
func (b *backend) raw(t *testing.T) []byte {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(b.ms), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), "/conformance/"+t.Name()+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, kv := range resp.Kvs {
		out = append(append(append(out, kv.Key...), '='), kv.Value...)
		out = append(out, '\n')
	}
	return out
}

func (b *backend) sealed() storetest.SealedBackend {
	return storetest.SealedBackend{Open: b.open, Raw: b.raw}
}

// TestPrefixesAreIndependent: two stores under different prefixes of one
// etcd share nothing, and a prefix holding something else is refused.
func TestPrefixesAreIndependent(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/a", 0), open(t, ms, "/a2", 0)
	k := store.Key{Kind: "services", Name: "web"}
	if _, err := a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`"a"`)}}, &store.Entry{Summary: "a"}, 10); err != nil {
		t.Fatal(err)
	}
	if objs, _, err := b.List(ctx); err != nil || len(objs) != 0 {
		t.Fatalf("/a2 sees %d objects of /a (%v)", len(objs), err)
	}
	if h, err := b.History(ctx); err != nil || len(h) != 0 {
		t.Fatalf("/a2 sees the history of /a: %v %v", h, err)
	}
	cli := a.cli
	if _, err := cli.Put(ctx, "/other/meta", "not json"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, Options{Endpoints: endpoints(ms), Prefix: "/other/"})
	if err == nil || !strings.Contains(err.Error(), "/other/meta is not a Pylon store") {
		t.Fatalf("a foreign prefix: %v", err)
	}
	if _, err := Open(ctx, Options{Endpoints: endpoints(ms), Prefix: "relative"}); err == nil {
		t.Fatal("a relative prefix was accepted")
	}
}

// TestReplicasSeeEachOther: two stores on one prefix are two replicas. A
// commit through one is read and watched by the other, and revisions
// checked by one refuse a stale write through the other.
func TestReplicasSeeEachOther(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/fleet", 0), open(t, ms, "/fleet", 0)
	if a.Base() != b.Base() {
		t.Fatalf("replicas disagree on the base revision: %d, %d", a.Base(), b.Base())
	}
	_, start, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := b.Watch(ctx, start)
	k := store.Key{Kind: "services", Name: "web"}
	rev, err := a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`), Revision: -1}}, &store.Entry{Summary: "one"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-events:
		if got != rev {
			t.Fatalf("watch: revision %d, committed %d", got, rev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other replica's watch saw nothing")
	}
	o, err := b.Get(ctx, k)
	if err != nil || o.Revision != rev || string(o.Body) != "1" {
		t.Fatalf("the other replica reads %+v %v", o, err)
	}
	// Both replicas write the same object at the revision they read:
	// one wins, the other is refused.
	if _, err := b.Commit(ctx, []store.Change{{Key: k, Body: []byte(`2`), Revision: rev}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`3`), Revision: rev}}, nil, 10); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale write through the other replica: %v", err)
	}
	cancel()
	waitClosed(t, events)
}

// waitClosed drains a watch channel until it is closed, bounded.
func waitClosed(t *testing.T, ch <-chan int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the watch channel was not closed after its context ended")
		}
	}
}

// TestConcurrentCommitsFromReplicas: replicas writing different objects at
// once all succeed (the store retries a transaction that lost the race),
// each at its own revision, and the history has every entry.
func TestConcurrentCommitsFromReplicas(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	replicas := []*Store{open(t, ms, "/race", 0), open(t, ms, "/race", 0), open(t, ms, "/race", 0)}
	const each = 10
	var mu sync.Mutex
	revs := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas)*each)
	for r, s := range replicas {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("r%d-%d", r, i)
				rev, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: name}, Body: []byte(`1`), Revision: -1}}, &store.Entry{Summary: name}, 0)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				mu.Lock()
				if other, dup := revs[rev]; dup {
					errs <- fmt.Errorf("%s and %s both at revision %d", name, other, rev)
				}
				revs[rev] = name
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h, err := replicas[0].History(ctx)
	if err != nil || len(h) != len(replicas)*each {
		t.Fatalf("history: %d entries, %v", len(h), err)
	}
	for _, e := range h {
		if revs[e.Revision] != e.Summary {
			t.Errorf("entry %d says %q, the commit at that revision was %q", e.Revision, e.Summary, revs[e.Revision])
		}
	}
}

// TestLeasesExpireFleetWide: an object with a lease, renewed through
// another replica, outlives its first expiry; not renewed, etcd deletes it
// for every replica and their watches say so.
func TestLeasesExpireFleetWide(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/leases", 0), open(t, ms, "/leases", 0)
	k := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	const ttl = 2 * time.Second
	rev, err := a.Commit(ctx, []store.Change{{Key: k, Body: []byte(`{"address":"10.0.0.1","port":80}`), Expires: time.Now().Add(ttl)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	events := b.Watch(ctx, rev)
	// Renewed through b, with the same TTL, for twice the TTL and more
	// (etcd checks expiries every 500ms): still there, at the same
	// revision.
	deadline := time.Now().Add(2*ttl + 600*time.Millisecond)
	for renewals := 0; renewals < 3 || time.Now().Before(deadline); renewals++ {
		exp := time.Now().Add(ttl)
		if err := b.Touch(ctx, k, exp); err != nil {
			t.Fatal(err)
		}
		o, err := a.Get(ctx, k)
		if err != nil || o.Revision != rev || !o.Expires.Equal(exp) {
			t.Fatalf("after a renewal through the other replica: %+v %v (want revision %d, expiry %v)", o, err, rev, exp)
		}
		waitFor(t, 5*time.Second, "half the TTL", func() bool { return time.Until(exp) < ttl/2 })
		if renewals > 20 {
			t.Fatal("renewal loop ran away")
		}
	}
	// Not renewed any more: gone from both, without anyone deleting it.
	waitFor(t, 3*ttl+2*time.Second, "the lease to expire in etcd", func() bool {
		_, err := b.Get(ctx, k)
		return errors.Is(err, store.ErrNotFound)
	})
	if objs, _, err := a.List(ctx); err != nil || len(objs) != 0 {
		t.Fatalf("the other replica still lists %v (%v)", objs, err)
	}
	select {
	case got := <-events:
		if got <= rev {
			t.Fatalf("the expiry was watched at revision %d, not after %d", got, rev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the expiry did not reach the watch")
	}
	if resp, err := a.cli.Get(ctx, a.leasePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("lease records left: %v %v", resp, err)
	}
}

// TestTouchLongerMovesTheLease: a renewal asking for more than the TTL
// granted moves the object to a longer lease: same content, new revision,
// the old lease revoked.
func TestTouchLongerMovesTheLease(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	s := open(t, ms, "/longer", 0)
	k := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`), Expires: time.Now().Add(10 * time.Second)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.cli.Get(ctx, s.objectKey(k))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	if err := s.Touch(ctx, k, exp); err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(ctx, k)
	if err != nil || o.Revision <= rev || string(o.Body) != "1" || !o.Expires.Equal(exp) {
		t.Fatalf("after a longer renewal: %+v %v", o, err)
	}
	ttl, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(first.Kvs[0].Lease))
	if err != nil || ttl.TTL != -1 {
		t.Fatalf("the first lease is still alive: %+v %v", ttl, err)
	}
	if err := s.Touch(ctx, store.Key{Kind: "endpoints.web", Name: "none"}, exp); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renewing a missing object: %v", err)
	}
}

// TestTooManyOperations: a commit larger than etcd takes in one
// transaction is refused with a message saying what to do, and writes
// nothing.
func TestTooManyOperations(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	s := open(t, ms, "/big", 0)
	var changes []store.Change
	for i := range 200 {
		changes = append(changes, store.Change{Key: store.Key{Kind: "services", Name: fmt.Sprint("s", i)}, Body: []byte(`1`)})
	}
	_, err := s.Commit(ctx, changes, &store.Entry{}, 10)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "--max-txn-ops") || !strings.Contains(err.Error(), "prune") {
		t.Fatalf("200 changes: %v, want store.ErrTooLarge naming --max-txn-ops and what to do for a prune", err)
	}
	if objs, _, err := s.List(ctx); err != nil || len(objs) != 0 {
		t.Fatalf("a refused commit wrote %d objects (%v)", len(objs), err)
	}
	// Told the truth about a larger limit, the store sends it, and etcd's
	// refusal is as clear.
	s.maxOps = 1000
	if _, err := s.Commit(ctx, changes, &store.Entry{}, 10); !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "max-txn-ops") {
		t.Fatalf("200 changes past etcd's own limit: %v", err)
	}
}

// TestPruningDropsVersions: after many commits with a short history, the
// past versions left are those the kept entries read.
func TestPruningDropsVersions(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	s := open(t, ms, "/prune", 0)
	const keep = 3
	for i := range 40 {
		k := store.Key{Kind: "services", Name: fmt.Sprint("s", i%4)}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, `%d`, i)}}, &store.Entry{}, keep); err != nil {
			t.Fatal(err)
		}
	}
	ep := store.Key{Kind: "endpoints.web", Name: "a:1"}
	for i := range 20 {
		if _, err := s.Commit(ctx, []store.Change{{Key: ep, Body: fmt.Appendf(nil, `%d`, i)}}, nil, keep); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := s.cli.Get(ctx, s.versionPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	// Each kept entry but the newest reads at most one replaced version.
	if resp.Count > keep {
		t.Fatalf("%d past versions kept for %d entries", resp.Count, keep)
	}
	// Keeping one entry, the newest, no past version is ever read: none
	// is left, not even one copied by the commit that prunes.
	for i := range 10 {
		k := store.Key{Kind: "services", Name: fmt.Sprint("s", i%4)}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, `"one%d"`, i)}}, &store.Entry{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	resp, err = s.cli.Get(ctx, s.versionPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keeping one entry: %d past versions left (%v)", resp.Count, err)
	}
}

// TestReadsSplitToTheLimit: a commit whose reads do not fit in one
// transaction reads the rest at the same revision, and checks them: the
// last change is read in a second transaction.
func TestReadsSplitToTheLimit(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	s := open(t, ms, "/split", 0)
	s.maxOps = 8
	last := store.Key{Kind: "services", Name: "s6"}
	rev, err := s.Commit(ctx, []store.Change{{Key: last, Body: []byte(`0`)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	changes := func(lastRev int64) []store.Change {
		var out []store.Change
		for i := range 6 {
			out = append(out, store.Change{Key: store.Key{Kind: "services", Name: fmt.Sprint("s", i)}, Body: []byte(`1`)})
		}
		return append(out, store.Change{Key: last, Body: []byte(`1`), Revision: lastRev})
	}
	if _, err := s.Commit(ctx, changes(rev+1), nil, 10); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale revision on the object read second: %v", err)
	}
	if _, err := s.Commit(ctx, changes(rev), nil, 10); err != nil {
		t.Fatal(err)
	}
	if objs, _, err := s.List(ctx); err != nil || len(objs) != 7 {
		t.Fatalf("%d objects, %v", len(objs), err)
	}
}

// TestTooLarge: a commit larger than etcd or its client takes is refused
// as such, not as an unreachable etcd, and writes nothing.
func TestTooLarge(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	s := open(t, ms, "/large", 0)
	for _, size := range []int{1600 << 10, 3 << 20} {
		body := append(append([]byte(`"`), strings.Repeat("x", size)...), '"')
		_, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "big"}, Body: body}}, &store.Entry{}, 10)
		if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "larger than etcd accepts") {
			t.Fatalf("a %d byte body: %v", size, err)
		}
	}
	if objs, _, err := s.List(ctx); err != nil || len(objs) != 0 {
		t.Fatalf("a refused commit wrote %d objects (%v)", len(objs), err)
	}
}

// TestCommitSince: a commit conditioned on the revision its config was
// validated at is refused once another replica committed after it, and
// goes through when nothing did (lease renewals do not count).
func TestCommitSince(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/since", 0), open(t, ms, "/since", 0)
	ep := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	if _, err := b.Commit(ctx, []store.Change{{Key: ep, Body: []byte(`1`), Expires: time.Now().Add(time.Hour)}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	_, validated, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Touch(ctx, ep, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	web := store.Key{Kind: "services", Name: "web"}
	if _, err := a.CommitSince(ctx, validated, []store.Change{{Key: web, Body: []byte(`1`)}}, &store.Entry{}, 10); err != nil {
		t.Fatalf("nothing committed since the validation, a renewal only: %v", err)
	}
	_, validated, err = a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "api"}, Body: []byte(`1`)}}, &store.Entry{}, 10); err != nil {
		t.Fatal(err)
	}
	_, err = a.CommitSince(ctx, validated, []store.Change{{Key: web, Body: nil}}, &store.Entry{}, 10)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "validate again") {
		t.Fatalf("another replica committed after the validation: %v", err)
	}
	if _, err := a.Get(ctx, web); err != nil {
		t.Fatalf("the refused commit deleted: %v", err)
	}
}
