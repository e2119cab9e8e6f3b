// Package storetest is the conformance suite every store backend runs.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
)

// Sizer is a backend that can say how much room it takes: the size
// property is checked on backends that implement it.
type Sizer interface {
	Size() (int64, error)
}

// Run checks a backend. open returns a fresh store, or (reopen) the same
// store again after closing it, to check durability.
func Run(t *testing.T, open func(t *testing.T, reopen bool) store.Store) {
	ctx := context.Background()
	k := store.Key{Kind: "services", Name: "web"}

	t.Run("commit_list_get", func(t *testing.T) {
		s := open(t, false)
		rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`{"name":"web"}`), Revision: -1}}, &store.Entry{Summary: "create web", Version: "v1"}, 10)
		if err != nil || rev != 1 {
			t.Fatalf("commit: rev %d err %v", rev, err)
		}
		o, err := s.Get(ctx, k)
		if err != nil || string(o.Body) != `{"name":"web"}` || o.Revision != 1 {
			t.Fatalf("get: %+v %v", o, err)
		}
		objs, cur, err := s.List(ctx)
		if err != nil || cur != 1 || len(objs) != 1 {
			t.Fatalf("list: %d objects at %d, %v", len(objs), cur, err)
		}
		if _, err := s.Get(ctx, store.Key{Kind: "services", Name: "none"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing object: %v", err)
		}
	})

	t.Run("conflicts_fail_the_whole_commit", func(t *testing.T) {
		s := open(t, false)
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`1`), Revision: -1}}, &store.Entry{}, 10); err != nil {
			t.Fatal(err)
		}
		other := store.Key{Kind: "services", Name: "api"}
		_, err := s.Commit(ctx, []store.Change{
			{Key: other, Body: []byte(`2`)},
			{Key: k, Body: []byte(`3`), Revision: 7}, // stale
		}, &store.Entry{}, 10)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale revision: %v", err)
		}
		if _, err := s.Get(ctx, other); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("a failed commit wrote part of its changes")
		}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`4`), Revision: -1}}, &store.Entry{}, 10); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("create over an existing object: %v", err)
		}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: nil, Revision: 1}}, &store.Entry{}, 10); err != nil {
			t.Fatalf("delete at the right revision: %v", err)
		}
	})

	t.Run("history_is_bounded_and_holds_objects", func(t *testing.T) {
		s := open(t, false)
		for i := range 5 {
			if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte{byte('0' + i)}}}, &store.Entry{Summary: "put", Version: string(rune('a' + i))}, 3); err != nil {
				t.Fatal(err)
			}
		}
		h, err := s.History(ctx)
		if err != nil || len(h) != 3 || h[0].Revision != 5 || h[2].Revision != 3 {
			t.Fatalf("history %+v %v", h, err)
		}
		e, err := s.At(ctx, 4)
		if err != nil || len(e.Objects) != 1 || string(e.Objects[0].Body) != "3" || e.Version != "d" {
			t.Fatalf("at 4: %+v %v", e, err)
		}
		if _, err := s.At(ctx, 1); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a pruned revision: %v", err)
		}
	})

	t.Run("durable_across_reopen", func(t *testing.T) {
		s := open(t, false)
		exp := time.Now().Add(time.Hour).Truncate(time.Second)
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`"kept"`), Expires: exp}}, &store.Entry{Summary: "lease"}, 10); err != nil {
			t.Fatal(err)
		}
		if err := s.Touch(ctx, k, exp.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		s = open(t, true)
		o, err := s.Get(ctx, k)
		if err != nil || string(o.Body) != `"kept"` || !o.Expires.Equal(exp.Add(time.Hour)) {
			t.Fatalf("after reopen: %+v %v", o, err)
		}
		if h, _ := s.History(ctx); len(h) != 1 {
			t.Fatalf("a touch wrote history: %d entries", len(h))
		}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`"runtime"`)}}, nil, 10); err != nil {
			t.Fatal(err)
		}
		if h, _ := s.History(ctx); len(h) != 1 {
			t.Fatalf("a commit without an entry wrote history: %d entries", len(h))
		}
	})

	t.Run("touch_renews_without_a_new_revision", func(t *testing.T) { touchRenews(t, open(t, false)) })
	t.Run("history_keeps_what_changed", func(t *testing.T) { historyKeepsWhatChanged(t, open(t, false)) })
	t.Run("at_reads_every_kept_revision_across_pruning", func(t *testing.T) { atAcrossPruning(t, open) })
	t.Run("history_numbers_are_the_commits", func(t *testing.T) { historyNumbers(t, open(t, false)) })
}

// historyNumbers: a history entry's revision is the revision its commit
// returned and the objects it wrote carry, so that the numbers history,
// At (diff, rollback) and optimistic concurrency take are one numbering;
// a runtime commit between two entries (a registration) takes a revision
// the history skips (pylon history says why), which At does not serve.
func historyNumbers(t *testing.T, s store.Store) {
	ctx := context.Background()
	web := store.Key{Kind: "services", Name: "web"}
	ep := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	one, err := s.Commit(ctx, []store.Change{{Key: web, Body: []byte(`"one"`), Revision: -1}}, &store.Entry{Summary: "one"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	runtime, err := s.Commit(ctx, []store.Change{{Key: ep, Body: []byte(`{"port":80}`)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The revision history showed for web is the one a write checks.
	two, err := s.Commit(ctx, []store.Change{{Key: web, Body: []byte(`"two"`), Revision: one}}, &store.Entry{Summary: "two"}, 10)
	if err != nil {
		t.Fatalf("a write at the revision the history showed: %v", err)
	}
	if !(one < runtime && runtime < two) {
		t.Fatalf("revisions %d, %d (runtime), %d do not increase", one, runtime, two)
	}
	h, err := s.History(ctx)
	if err != nil || len(h) != 2 || h[0].Revision != two || h[1].Revision != one {
		t.Fatalf("history %+v, %v: want the entries at %d and %d", h, err, two, one)
	}
	if _, err := s.At(ctx, runtime); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("at %d, a runtime commit: %v, want not found", runtime, err)
	}
	e, err := s.At(ctx, two)
	if err != nil || state(e.Objects) != `endpoints.web/10.0.0.1:80={"port":80} services/web="two"` {
		t.Fatalf("at %d: %v %s", two, err, state(e.Objects))
	}
	for _, o := range e.Objects {
		if want := map[string]int64{"services": two, "endpoints.web": runtime}[o.Kind]; o.Revision != want {
			t.Errorf("at %d: %s/%s has revision %d, want %d", two, o.Kind, o.Name, o.Revision, want)
		}
	}
	if e, err := s.At(ctx, one); err != nil || state(e.Objects) != `services/web="one"` || e.Objects[0].Revision != one {
		t.Errorf("at %d: %v %+v", one, err, e.Objects)
	}
	if o, err := s.Get(ctx, web); err != nil || o.Revision != two {
		t.Errorf("get: %+v %v, want revision %d", o, err, two)
	}
	if _, err := s.Commit(ctx, []store.Change{{Key: web, Body: []byte(`"three"`), Revision: one}}, &store.Entry{}, 10); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a write at an older entry's revision: %v, want a conflict", err)
	}
	if _, cur, err := s.List(ctx); err != nil || cur < two {
		t.Errorf("list at revision %d, %v: before the last commit %d", cur, err, two)
	}
}

// touchRenews: renewing a lease with the TTL it was written with (what a
// registrant does) keeps the object's revision and body, moves its expiry,
// and writes no history; renewing a missing object is ErrNotFound. A
// store shared by replicas renews through any of them, so the expiry must
// be read back exactly, not only kept in one process.
func touchRenews(t *testing.T, s store.Store) {
	ctx := context.Background()
	k := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	const ttl = time.Hour
	rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`{"port":80}`), Expires: time.Now().Add(ttl)}}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(ttl)
	if err := s.Touch(ctx, k, exp); err != nil {
		t.Fatal(err)
	}
	o, err := s.Get(ctx, k)
	if err != nil || o.Revision != rev || string(o.Body) != `{"port":80}` || !o.Expires.Equal(exp) {
		t.Fatalf("after a renewal: %+v %v (want revision %d, expiry %v)", o, err, rev, exp)
	}
	objs, _, err := s.List(ctx)
	if err != nil || len(objs) != 1 || !objs[0].Expires.Equal(exp) {
		t.Fatalf("list after a renewal: %+v %v", objs, err)
	}
	if h, err := s.History(ctx); err != nil || len(h) != 0 {
		t.Fatalf("a renewal wrote history: %+v %v", h, err)
	}
	if err := s.Touch(ctx, store.Key{Kind: "endpoints.web", Name: "none:1"}, exp); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renewing a missing object: %v", err)
	}
}

// historyKeepsWhatChanged: one large object, then many one-line writes to
// another. A history that copied every object per revision grew by the
// large object on each write; one that keeps what changed grows by the
// small writes only.
func historyKeepsWhatChanged(t *testing.T, s store.Store) {
	ctx := context.Background()
	sz, ok := s.(Sizer)
	if !ok {
		t.Skip("the backend does not report its size")
	}
	const big, writes = 8 << 20, 30
	body := append([]byte(`"`), append(bytes.Repeat([]byte("x"), big), '"')...)
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "big"}, Body: body}}, &store.Entry{Summary: "big"}, 100); err != nil {
		t.Fatal(err)
	}
	before, err := sz.Size()
	if err != nil {
		t.Fatal(err)
	}
	small := store.Key{Kind: "services", Name: "small"}
	start := time.Now()
	for i := range writes {
		if _, err := s.Commit(ctx, []store.Change{{Key: small, Body: fmt.Appendf(nil, `{"n":%d}`, i)}}, &store.Entry{Summary: "small"}, 100); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(start) / writes
	after, err := sz.Size()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a %d MiB object then %d small writes: %d -> %d bytes, %v per small write", big>>20, writes, before, after, per)
	if after > 3*big {
		t.Fatalf("the store grew to %d bytes for a %d byte object and %d one-line writes: the history copies what did not change", after, big, writes)
	}
	// Every revision still reads back whole.
	h, err := s.History(ctx)
	if err != nil || len(h) != writes+1 {
		t.Fatalf("history: %d entries, %v", len(h), err)
	}
	e, err := s.At(ctx, h[writes/2].Revision)
	if err != nil || len(e.Objects) != 2 {
		t.Fatalf("at %d: %d objects, %v", h[writes/2].Revision, len(e.Objects), err)
	}
}

// state is a config as a comparable string: key=body, sorted.
func state(objs []store.Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, o.Kind+"/"+o.Name+"="+string(o.Body))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// atAcrossPruning writes a mixed sequence (creates, updates, deletes,
// re-creates, runtime writes without history), remembers the full state
// after each history commit, then checks At returns exactly that state for
// every kept revision, before and after reopening, and that a pruned
// revision is gone.
func atAcrossPruning(t *testing.T, open func(t *testing.T, reopen bool) store.Store) {
	ctx := context.Background()
	s := open(t, false)
	const keep = 4
	want := map[int64]string{}
	key := func(i int) store.Key { return store.Key{Kind: "services", Name: fmt.Sprintf("s%d", i%5)} }
	for i := range 40 {
		var changes []store.Change
		switch {
		case i%7 == 3: // delete one, if there
			if _, err := s.Get(ctx, key(i)); err == nil {
				changes = append(changes, store.Change{Key: key(i)})
			}
		case i%4 == 1: // two objects in one commit
			changes = append(changes, store.Change{Key: key(i), Body: fmt.Appendf(nil, `"a%d"`, i)}, store.Change{Key: key(i + 1), Body: fmt.Appendf(nil, `"b%d"`, i)})
		default:
			changes = append(changes, store.Change{Key: key(i), Body: fmt.Appendf(nil, `"c%d"`, i)})
		}
		if len(changes) == 0 {
			continue
		}
		var entry *store.Entry
		if i%3 != 2 { // every third commit is runtime: no history entry
			entry = &store.Entry{Summary: fmt.Sprint("step ", i), Version: fmt.Sprint("v", i)}
		}
		rev, err := s.Commit(ctx, changes, entry, keep)
		if err != nil {
			t.Fatal(err)
		}
		if entry != nil {
			objs, _, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want[rev] = state(objs)
		}
	}
	check := func(s store.Store) {
		t.Helper()
		h, err := s.History(ctx)
		if err != nil || len(h) != keep {
			t.Fatalf("history: %d entries, %v", len(h), err)
		}
		oldest := h[len(h)-1].Revision
		for rev, w := range want {
			e, err := s.At(ctx, rev)
			if rev < oldest {
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("pruned revision %d: %v", rev, err)
				}
				continue
			}
			if err != nil || state(e.Objects) != w || e.Revision != rev {
				t.Errorf("at %d: %v\n got %s\nwant %s", rev, err, state(e.Objects), w)
			}
			for _, o := range e.Objects {
				if o.Revision == 0 || o.Revision > rev {
					t.Errorf("at %d: %s/%s has revision %d", rev, o.Kind, o.Name, o.Revision)
				}
			}
		}
	}
	check(s)
	check(open(t, true))
}
