package fleetstatus

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store/etcd"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// runSelf is run for a replica that publishes self.
func runSelf(t *testing.T, st *etcd.Store, replica string, self Self, l *local) *Fleet {
	t.Helper()
	return runOpts(t, Options{Replica: replica, Store: st, Local: l.get, Period: 50 * time.Millisecond, TTL: 10 * time.Second, Self: self})
}

func runOpts(t *testing.T, o Options) *Fleet {
	t.Helper()
	f := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

func streams(n int, prefix string) []status.Stream {
	out := make([]status.Stream, n)
	for i := range out {
		out[i] = stream(prefix+string(rune('a'+i)), "x")
	}
	return out
}

// A replica balances with the replicas of its own shard only: their count
// and streams, its own counted as open now; and it knows which replica
// serves a group of another shard, and where.
func TestLoadCountsTheReplicasOfTheSameShard(t *testing.T) {
	srv := etcdtest.Start(t)
	la, lb, lc, ld := &local{}, &local{}, &local{}, &local{}
	la.set(streams(3, "a-")...)
	lb.set(streams(5, "b-")...)
	lc.set(streams(7, "c-")...)
	ld.set(streams(4, "d-")...)
	web := Self{Groups: []string{"web-*"}, XDS: "127.0.0.1:1001"}
	a := runSelf(t, srv.Open(t, "/fleet", time.Second), "a", web, la)
	runSelf(t, srv.Open(t, "/fleet", time.Second), "b", Self{Groups: []string{"web-*"}, XDS: "127.0.0.1:1002"}, lb)
	runSelf(t, srv.Open(t, "/fleet", time.Second), "c", Self{Groups: []string{"db", "cache"}, XDS: "127.0.0.1:1003"}, lc)
	// d drains: its streams are on their way to a and b.
	runOpts(t, Options{Replica: "d", Store: srv.Open(t, "/fleet", time.Second), Local: ld.get, Period: 50 * time.Millisecond, TTL: 10 * time.Second,
		Self: Self{Groups: []string{"web-*"}, XDS: "127.0.0.1:1004"}, Draining: func() bool { return true }})

	want := guard.Load{Replicas: 2, Streams: 5 + 3 + 4, Least: 5, Fresh: true}
	waitFor(t, "a's load is its shard's: b's 5 streams, draining d's 4 and its own 3, on 2 replicas (not d)", func() bool { return a.Load(3) == want && len(a.Peers()) == 3 })
	// a published 3: with 6 now, b (live, of its shard) is taken to have
	// gained 3 too since its summary, d (draining) not.
	if got, want := a.Load(6), (guard.Load{Replicas: 2, Streams: 6 + 8 + 4, Least: 8, Fresh: true}); got != want {
		t.Errorf("a's load with 3 streams more than it published = %+v, want %+v", got, want)
	}
	if got, want := a.Load(1), (guard.Load{Replicas: 2, Streams: 1 + 5 + 4, Least: 5, Fresh: true}); got != want {
		t.Errorf("a's load with 2 streams fewer than it published = %+v, want %+v", got, want)
	}
	peers := a.ServedBy("cache")
	if len(peers) != 1 || peers[0].Replica != "c" || peers[0].XDS != "127.0.0.1:1003" {
		t.Errorf("ServedBy(cache) = %+v, want replica c at 127.0.0.1:1003", peers)
	}
	if peers := a.ServedBy("web-eu"); len(peers) != 1 || peers[0].Replica != "b" {
		t.Errorf("ServedBy(web-eu) = %+v, want b (a itself is not among the others, d drains)", peers)
	}
	if peers := a.ServedBy("batch"); len(peers) != 0 {
		t.Errorf("ServedBy(batch) = %+v, want none: no replica serves it", peers)
	}
	remote, _ := a.Remote()
	for _, r := range remote {
		if r.Replica == "c" && len(r.Groups) != 2 {
			t.Errorf("c's proxy %s is listed with groups %v, want c's selector", r.Node, r.Groups)
		}
	}

	srv.Stop()
	waitFor(t, "with etcd away, the load is stale: nothing is balanced on it", func() bool { return !a.Load(3).Fresh })
	if peers := a.ServedBy("cache"); len(peers) != 0 {
		t.Errorf("with etcd away, ServedBy(cache) = %+v, want none named from a stale read", peers)
	}
}

// Two replicas started with `--groups a,b` and `--groups b,a,a` serve one
// shard and balance together.
func TestSameGroupsIgnoresOrderAndRepetition(t *testing.T) {
	if !sameGroups([]string{"a", "b"}, []string{"b", "a", "a"}) {
		t.Error("a,b and b,a,a are not the same shard")
	}
	if sameGroups([]string{"a"}, []string{"a", "b"}) {
		t.Error("a and a,b are the same shard")
	}
}

// A replica that starts draining says so at once (Announce), not a
// Period later: meanwhile the others would count it among the replicas
// sharing the proxies it hands over, and refuse them.
func TestADrainIsPublishedAtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	var draining atomic.Bool
	announce := make(chan struct{})
	lc := &local{}
	lc.set(streams(4, "c-")...)
	runOpts(t, Options{Replica: "c", Store: srv.Open(t, "/fleet", time.Second), Local: lc.get, Period: time.Hour, TTL: 10 * time.Second,
		Draining: draining.Load, Announce: announce})
	a := runSelf(t, srv.Open(t, "/fleet", time.Second), "a", Self{}, &local{})
	waitFor(t, "a reads c's first summary", func() bool { return len(a.Peers()) == 1 })
	draining.Store(true)
	close(announce)
	waitFor(t, "a reads that c drains, long before c's next Period (an hour)", func() bool {
		p := a.Peers()
		return len(p) == 1 && p[0].Draining
	})
}
