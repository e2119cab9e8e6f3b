package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
)

// Renewals from many goroutines at once, some of objects that do not
// exist: each existing lease ends at the expiry of its last renewal, each
// missing one fails alone with ErrNotFound, and none of them fails the
// others' commit.
func TestConcurrentTouches(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const registrants, renewals = 200, 20
	base := time.Now().Truncate(time.Second)
	var changes []store.Change
	key := func(r int) store.Key {
		return store.Key{Kind: "endpoints.web", Name: fmt.Sprintf("10.0.%d.%d:80", r/250, r%250)}
	}
	for r := range registrants {
		if r%2 == 0 {
			changes = append(changes, store.Change{Key: key(r), Body: []byte(`{"port":80}`), Expires: base})
		}
	}
	if _, err := s.Commit(ctx, changes, nil, 10); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, registrants)
	for r := range registrants {
		wg.Go(func() {
			for i := 1; i <= renewals; i++ {
				err := s.Touch(ctx, key(r), base.Add(time.Duration(i)*time.Second))
				switch {
				case r%2 == 0 && err != nil:
					errs[r] = fmt.Errorf("renewal %d: %v", i, err)
					return
				case r%2 == 1 && !errors.Is(err, store.ErrNotFound):
					errs[r] = fmt.Errorf("renewal %d of a missing object: %v, want ErrNotFound", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("registrant %d: %v", r, err)
		}
		if r%2 == 1 {
			continue
		}
		o, err := s.Get(ctx, key(r))
		if err != nil || !o.Expires.Equal(base.Add(renewals*time.Second)) {
			t.Fatalf("registrant %d: %+v %v, want the expiry of its last renewal", r, o.Expires, err)
		}
	}
}

// A lone renewal commits at once and alone; renewals that arrive while a
// commit is under way are committed together, in fewer transactions than
// renewals.
func TestTouchesGrouped(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	k := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`{}`), Expires: time.Now()}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		s.touches.mu.Lock()
		defer s.touches.mu.Unlock()
		return s.touches.commits
	}
	before := writes()
	if err := s.Touch(ctx, k, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := writes() - before; n != 1 {
		t.Fatalf("a lone renewal took %d write transactions, want 1", n)
	}
	// Hold the lead's commit until every other renewal has queued.
	const n = 50
	s.touches.mu.Lock()
	s.touches.leading = true
	s.touches.mu.Unlock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := s.Touch(ctx, k, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.touches.mu.Lock()
		queued := len(s.touches.queue)
		s.touches.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d renewals queued", queued, n)
		}
	}
	before = writes()
	s.touches.lead(s.db)
	wg.Wait()
	if got := writes() - before; got != 1 {
		t.Fatalf("%d queued renewals took %d write transactions, want 1", n, got)
	}
}
