package configstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// heldStore holds the first commit until released, and counts commits:
// the writes that arrive meanwhile queue behind it, so the test knows
// exactly which writes the next commits group.
type heldStore struct {
	store.Store
	release chan struct{}
	armed   atomic.Bool // the next runtime commit is held
	holding atomic.Bool // a commit is held now
	commits atomic.Int64
}

func (h *heldStore) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	if entry == nil && h.armed.CompareAndSwap(true, false) {
		h.holding.Store(true)
		<-h.release
	}
	h.commits.Add(1)
	return h.Store.Commit(ctx, changes, entry, keep)
}

func newHeld(t *testing.T) (*Service, *heldStore) {
	t.Helper()
	st := newBolt(t)
	h := &heldStore{Store: st, release: make(chan struct{})}
	s := New(Options{Store: h, Registry: xdstype.New()})
	if _, err := s.Commit(t.Context(), []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	h.commits.Store(0)
	h.armed.Store(true)
	return s, h
}

// queued waits, bounded, until n writes wait behind the held commit.
func queued(t *testing.T, s *Service, n int) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		s.group.mu.Lock()
		got := len(s.group.queue)
		s.group.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// 1,000 concurrent registrants: every registration lands exactly once,
// in a handful of commits (not one each), none of them in the history,
// and the one invalid registration is refused alone.
func TestGroupedRegistrationsLandOnce(t *testing.T) {
	s, h := newHeld(t)
	ctx := t.Context()
	before, err := s.st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	errs := make([]error, n)
	revs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := s.Register(ctx, "web", model.Endpoint{Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250), Port: 8080}, time.Minute)
			errs[i], revs[i] = err, res.Revision
		})
	}
	// The first commit holds; every other registrant queues behind it.
	queued(t, s, n-1)
	_, badErr := s.Register(ctx, "web", model.Endpoint{Address: "10.9.9.9", Port: 0}, time.Minute)
	close(h.release)
	wg.Wait()
	if !errors.Is(badErr, ErrInvalid) {
		t.Errorf("a registration without a port: %v, want ErrInvalid", badErr)
	}
	for i, err := range errs {
		if err != nil || revs[i] == 0 {
			t.Fatalf("registration %d: revision %d, %v", i, revs[i], err)
		}
	}
	// One held commit, then the 999 queued ones in batches of at most
	// maxGroupChanges.
	if got, most := h.commits.Load(), int64(1+(n-1+maxGroupChanges-1)/maxGroupChanges); got > most {
		t.Errorf("%d registrations took %d commits, want at most %d", n, got, most)
	}
	objs, _, err := s.st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, o := range objs {
		if o.Kind == "endpoints.web" {
			seen[o.Name]++
		}
	}
	if len(seen) != n {
		t.Errorf("%d endpoints stored, want %d", len(seen), n)
	}
	for name, c := range seen {
		if c != 1 {
			t.Errorf("%s stored %d times", name, c)
		}
	}
	after, err := s.st.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("registrations made %d history entries, want none", len(after)-len(before))
	}
}

// A write the store refuses inside a group (a conflict on the revision it
// named) fails alone: the writes grouped with it land.
func TestGroupedWriteFailsAlone(t *testing.T) {
	s, h := newHeld(t)
	ctx := t.Context()
	h.armed.Store(false)
	taken := store.Key{Kind: "endpoints.web", Name: "10.0.0.9:80"}
	if _, err := s.Register(ctx, "web", model.Endpoint{Address: "10.0.0.9", Port: 80}, 0); err != nil {
		t.Fatal(err)
	}
	h.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Register(ctx, "web", model.Endpoint{Address: "10.0.0.1", Port: 1}, 0); err != nil {
			t.Errorf("the held write: %v", err)
		}
	})
	waitFor(t, "the first commit held", func() bool { return h.holding.Load() })
	const n = 20
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c := store.Change{Key: store.Key{Kind: "endpoints.web", Name: fmt.Sprintf("10.0.1.%d:80", i)}, Body: []byte(`{"address":"10.0.1.1","port":80}`)}
			if i == n/2 {
				c = store.Change{Key: taken, Body: []byte(`{}`), Revision: -1} // must not exist: it does
			}
			_, errs[i] = s.commitRuntime(ctx, []store.Change{c})
		})
	}
	queued(t, s, n)
	close(h.release)
	wg.Wait()
	for i, err := range errs {
		if i == n/2 {
			if !errors.Is(err, store.ErrConflict) {
				t.Errorf("the conflicting write: %v, want a conflict", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("write %d failed with the conflicting one: %v", i, err)
		}
		if _, err := s.st.Get(ctx, store.Key{Kind: "endpoints.web", Name: fmt.Sprintf("10.0.1.%d:80", i)}); err != nil {
			t.Errorf("write %d not stored: %v", i, err)
		}
	}
}

// History "by" slots: a registration or deregistration is not a history
// entry, and says so (Recorded false), so that the admin API does not
// note an author for it; a config write is, and says so.
func TestRegistrationsRecordNoHistory(t *testing.T) {
	s := newService(t, 0)
	ctx := t.Context()
	res, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false)
	if err != nil || !res.Recorded {
		t.Fatalf("a config write: %+v, %v; want Recorded", res, err)
	}
	if res, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "api"}, Body: service("api", 80)}}, "api", true); err != nil || res.Recorded {
		t.Fatalf("a dry run: %+v, %v; want not Recorded", res, err)
	}
	ep := model.Endpoint{Address: "10.0.0.2", Port: 80}
	res, err = s.Register(ctx, "web", ep, time.Minute)
	if err != nil || res.Recorded || res.Revision == 0 {
		t.Fatalf("a registration: %+v, %v; want a revision, not Recorded", res, err)
	}
	if res, err = s.Register(ctx, "web", ep, time.Minute); err != nil || res.Recorded {
		t.Fatalf("a renewal: %+v, %v; want not Recorded", res, err)
	}
	if res, err = s.Deregister(ctx, "web", ep.Address, ep.Port); err != nil || res.Recorded {
		t.Fatalf("a deregistration: %+v, %v; want not Recorded", res, err)
	}
}

// BenchmarkRegistrations: new endpoints registered (with leases) by
// concurrent registrants on the embedded bolt store, fsync on; and
// renewals of registered endpoints. regs/s is the figure.
func BenchmarkRegistrations(b *testing.B) {
	for _, mode := range []string{"new", "renew"} {
		for _, c := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/registrants=%d", mode, c), func(b *testing.B) { benchRegister(b, c, mode == "renew") })
		}
	}
}

func benchRegister(b *testing.B, registrants int, renew bool) {
	st, err := bolt.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := New(Options{Store: st, Registry: xdstype.New()})
	ctx := context.Background()
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false); err != nil {
		b.Fatal(err)
	}
	ep := func(r, i int) model.Endpoint {
		if renew {
			i = 0 // each registrant renews its own endpoint
		}
		return model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", r/250, r%250, i%250), Port: uint32(1 + i/250%65000)}
	}
	if renew {
		for r := range registrants {
			if _, err := s.Register(ctx, "web", ep(r, 0), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for r := range registrants {
		wg.Go(func() {
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				if _, err := s.Register(ctx, "web", ep(r, i), time.Hour); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "regs/s")
}
