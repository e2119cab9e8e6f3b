package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestBoardRepublishedWithinItsLease: a replica whose lease etcd lost
// (it expired while etcd was away) puts its values again on a new lease.
// What may be left of an older, longer summary is unknown then, and is
// cleared in one request, not one per possible shard: cleared one by one,
// the put outlived its own new lease (2s) and etcd deleted the values it
// had just written, so the other replicas never listed this replica's
// proxies again, though it reported them published.
func TestBoardRepublishedWithinItsLease(t *testing.T) {
	ctx := context.Background()
	s := open(t, startCluster(t, 1), "/board", 0)
	b := s.Board("replica-a", time.Second)
	if err := b.Put(ctx, [][]byte{[]byte("0"), []byte("1"), []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Revoke(ctx, b.lease); err != nil {
		t.Fatal(err)
	}
	if alive, err := b.KeepAlive(ctx); alive || err != nil {
		t.Fatalf("KeepAlive on a revoked lease: alive %v, err %v; want false, nil", alive, err)
	}
	start := time.Now()
	if err := b.Put(ctx, [][]byte{[]byte("new")}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Put after a lost lease took %v, half the lease (2s) or more: its values may expire before it returns", took)
	}
	if alive, err := b.KeepAlive(ctx); !alive || err != nil {
		t.Errorf("KeepAlive right after Put: alive %v, err %v; want the new lease alive", alive, err)
	}
	boards, err := s.Boards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%q", boards); got != `map["replica-a":["new"]]` {
		t.Errorf("boards after the put on a new lease: %s, want only the new value", got)
	}
}

// TestBoardShorterPutDeletesTheRest: a summary of fewer shards than the
// last leaves none of the last one's extra shards, and nothing of another
// replica whose name shares a prefix.
func TestBoardShorterPutDeletesTheRest(t *testing.T) {
	ctx := context.Background()
	s := open(t, startCluster(t, 1), "/board", 0)
	a, a2 := s.Board("a", 10*time.Second), s.Board("a0", 10*time.Second)
	for _, put := range []struct {
		b      *Board
		shards []string
	}{{a, []string{"a0", "a1", "a2", "a3"}}, {a2, []string{"x0", "x1"}}, {a, []string{"b0", "b1"}}} {
		var shards [][]byte
		for _, v := range put.shards {
			shards = append(shards, []byte(v))
		}
		if err := put.b.Put(ctx, shards); err != nil {
			t.Fatal(err)
		}
	}
	boards, err := s.Boards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%q", boards), `map["a":["b0" "b1"] "a0":["x0" "x1"]]`; got != want {
		t.Errorf("boards: %s, want %s", got, want)
	}
}
