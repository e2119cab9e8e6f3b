package fleetstatus

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store/etcd"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

func TestMain(m *testing.M) {
	// As in the etcd store's tests: etcd's own peer HTTP connections,
	// nothing of this package's (it speaks only gRPC to etcd).
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}

const bound = 20 * time.Second

// waitFor polls cond until it holds, for at most bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", bound, what)
		}
		<-tick.C
	}
}

// local is a replica's tracker stand-in: streams the test sets.
type local struct {
	mu      sync.Mutex
	streams []status.Stream
}

func (l *local) set(s ...status.Stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams = s
}

func (l *local) get() []status.Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]status.Stream(nil), l.streams...)
}

// run runs a Fleet for replica on st; stop cancels it and waits.
func run(t *testing.T, st *etcd.Store, replica string, l *local, ttl time.Duration) (f *Fleet, stop func()) {
	t.Helper()
	f = New(Options{Replica: replica, Store: st, Local: l.get, Period: 50 * time.Millisecond, TTL: ttl})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", replica, err)
			}
		})
	}
	t.Cleanup(stop)
	return f, stop
}

// nodes lists what f shows of the others, as "replica/node=state".
func nodes(f *Fleet) string {
	remote, _ := f.Remote()
	var out []string
	for _, r := range remote {
		out = append(out, r.Replica+"/"+r.Node+"="+r.Types[0].State)
	}
	return strings.Join(out, ",")
}

// Each replica lists the other's proxies with its replica, follows their
// changes, and loses them at once when the other stops cleanly.
func TestReplicasSeeEachOther(t *testing.T) {
	srv := etcdtest.Start(t)
	la, lb := &local{}, &local{}
	la.set(stream("a-1", "x"))
	lb.set(stream("b-1", "x"), stream("b-2", "x"))
	a, _ := run(t, srv.Open(t, "/fleet", time.Second), "a", la, 10*time.Second)
	b, stopB := run(t, srv.Open(t, "/fleet", time.Second), "b", lb, 10*time.Second)

	waitFor(t, "a lists b's two proxies", func() bool { return nodes(a) == "b/b-1=NACKED,b/b-2=NACKED" })
	waitFor(t, "b lists a's proxy (and not its own)", func() bool { return nodes(b) == "a/a-1=NACKED" })

	synced := stream("b-1", "x")
	synced.Types[0].State = status.Synced
	lb.set(synced)
	waitFor(t, "a follows b's change", func() bool { return nodes(a) == "b/b-1=SYNCED" })

	stopB()
	// The TTL is 10s: gone well before, so the stop revoked the lease.
	start := time.Now()
	waitFor(t, "b's proxies leave a's list when b stops", func() bool { return nodes(a) == "" })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("b's proxies took %v to leave: the lease was not revoked", d)
	}
}

// A replica that dies without a word (its etcd connection gone) keeps its
// proxies listed until its lease expires, then they leave.
func TestDeadReplicaLeavesWhenItsLeaseExpires(t *testing.T) {
	srv := etcdtest.Start(t)
	la, lb := &local{}, &local{}
	lb.set(stream("b-1", "x"))
	a, _ := run(t, srv.Open(t, "/fleet", time.Second), "a", la, 10*time.Second)
	stB, err := etcd.Open(context.Background(), etcd.Options{Endpoints: []string{srv.Endpoint()}, Prefix: "/fleet", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	_, stopB := run(t, stB, "b", lb, ttl)
	waitFor(t, "a lists b's proxy", func() bool { return nodes(a) == "b/b-1=NACKED" })

	// The connection goes first: no renewal, and no revoke at the stop.
	stB.Close()
	died := time.Now()
	stopB()
	waitFor(t, "b's proxy leaves a's list when its lease expires", func() bool { return nodes(a) == "" })
	if d := time.Since(died); d < ttl/2 {
		t.Errorf("b's proxy left after %v, before its lease (%v) could expire: not what this test is about", d, ttl)
	}
}

// With etcd away, the list says it is partial; when etcd is back, it is
// whole again.
func TestEtcdAwayMakesTheListPartial(t *testing.T) {
	srv := etcdtest.Start(t)
	la, lb := &local{}, &local{}
	lb.set(stream("b-1", "x"))
	a, _ := run(t, srv.Open(t, "/fleet", 200*time.Millisecond), "a", la, 10*time.Second)
	run(t, srv.Open(t, "/fleet", 200*time.Millisecond), "b", lb, 10*time.Second)
	waitFor(t, "a lists b's proxy", func() bool { return nodes(a) == "b/b-1=NACKED" })

	srv.Stop()
	var first string
	waitFor(t, "a says its list is partial", func() bool {
		_, first = a.Remote()
		return strings.HasPrefix(first, Partial)
	})
	// As soon as its own publish fails, not a read timeout later.
	if strings.Contains(first, "reading fleet status") {
		t.Errorf("the list became partial only once the read failed too: %q", first)
	}
	if nodes(a) != "b/b-1=NACKED" {
		t.Errorf("a dropped what it last read of b: %q", nodes(a))
	}
	remote, partial := a.Remote()
	if !strings.Contains(partial, "as last read ") || !strings.Contains(partial, " ago") {
		t.Errorf("partial %q does not say how old the list is", partial)
	}
	for _, r := range remote {
		if !r.Stale || r.ReadAt.IsZero() {
			t.Errorf("%s of %s with etcd away: stale %v, read at %v; want stale, with when it was read", r.Node, r.Replica, r.Stale, r.ReadAt)
		}
	}
	srv.Restart()
	waitFor(t, "a's list is whole again", func() bool {
		_, partial := a.Remote()
		return partial == "" && nodes(a) == "b/b-1=NACKED"
	})
	remote, _ = a.Remote()
	for _, r := range remote {
		if r.Stale {
			t.Errorf("%s of %s still stale once etcd is back", r.Node, r.Replica)
		}
	}
}

// A lease etcd no longer knows (it expired while etcd was away from this
// replica) is replaced: the summary is published again on a new one.
func TestLostLeaseIsReplaced(t *testing.T) {
	srv := etcdtest.Start(t)
	la, lb := &local{}, &local{}
	lb.set(stream("b-1", "x"))
	a, _ := run(t, srv.Open(t, "/fleet", time.Second), "a", la, 10*time.Second)
	run(t, srv.Open(t, "/fleet", time.Second), "b", lb, 10*time.Second)
	waitFor(t, "a lists b's proxy", func() bool { return nodes(a) == "b/b-1=NACKED" })

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	resp, err := cli.Get(ctx, "/fleet/s/b/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("b's summary in etcd: %v, %v", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b publishes again on a new lease", func() bool {
		resp, err := cli.Get(ctx, "/fleet/s/b/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) != lease && resp.Kvs[0].Lease != 0
	})
	waitFor(t, "a lists b's proxy again", func() bool { return nodes(a) == "b/b-1=NACKED" })
}
