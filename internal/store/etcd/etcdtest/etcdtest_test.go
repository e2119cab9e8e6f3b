package etcdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.LeakOptions()...) }

// A three-member cluster elects a new leader when its leader is killed,
// keeps what was written before, takes writes again, and takes the killed
// member back on a restart; a single member stopped is unreachable and
// serves again after a restart.
func TestClusterLeaderKillAndRestart(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.StartCluster(t, 3)
	if eps := c.Endpoints(); len(eps) != 3 || eps[0] == eps[1] || eps[1] == eps[2] || eps[0] == eps[2] {
		t.Fatalf("endpoints %v: want three distinct", eps)
	}
	k := store.Key{Kind: "services", Name: "web"}
	st := c.Open(t, "/etcdtest", 2*time.Second)
	rev, err := st.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Leader()
	old.Kill()
	if old.Running() {
		t.Fatal("a killed member says it runs")
	}
	next := c.Leader()
	if next == old {
		t.Fatalf("%s still leads after it was killed", old.Name())
	}
	fresh := c.Open(t, "/etcdtest", 2*time.Second)
	if o, err := fresh.Get(ctx, k); err != nil || o.Revision != rev {
		t.Fatalf("after the leader's loss: %+v %v, want revision %d", o, err, rev)
	}
	if _, err := fresh.Commit(ctx, []store.Change{{Key: k, Body: []byte(`2`)}}, nil, 10); err != nil {
		t.Fatalf("a write after the election: %v", err)
	}
	old.Restart()
	if !old.Running() {
		t.Fatal("a restarted member does not run")
	}
	back := old.Open(t, "/etcdtest", 2*time.Second)
	// The restarted member catches up with the write it missed.
	within(t, "the restarted member reading the write made while it was down", func() bool {
		o, err := back.Get(ctx, k)
		return err == nil && string(o.Body) == "2"
	})

	one := etcdtest.Start(t)
	s := one.Open(t, "/single", 300*time.Millisecond)
	one.Stop()
	if _, _, err := s.List(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("list on a stopped member: %v", err)
	}
	one.Restart()
	// The client reconnects with its own backoff.
	within(t, "a list once the member is back", func() bool {
		_, _, err := s.List(ctx)
		return err == nil
	})
}

// within polls cond every 20ms until it holds, for at most 10s: a client
// reconnecting to a restarted member has no event to wait on.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		<-tick.C
	}
}
