// Package storetest is the conformance suite every store backend runs.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
)

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
}
