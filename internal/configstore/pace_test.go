package configstore

import (
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
)

// The pace follows the pipeline's cost: at once before the first update
// and after a quiet spell; min apart while the pipeline keeps up; as far
// apart as the pipeline took when a send had to wait for it; back to min
// as the pipeline catches up.
func TestPaceFollowsPipelineCost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := pace{min: 100 * time.Millisecond}
	if !p.next().IsZero() {
		t.Fatalf("the first update waits until %v", p.next())
	}
	p.handed(t0, t0) // the pipeline was free
	if got := p.next(); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("next after a free handoff: %v, want min later", got.Sub(t0))
	}
	// The next send waited 350ms: the pipeline spent 400ms on the last one.
	t1 := t0.Add(50 * time.Millisecond)
	p.handed(t1, t0.Add(400*time.Millisecond))
	if got := p.next().Sub(t0.Add(400 * time.Millisecond)); got != 400*time.Millisecond {
		t.Fatalf("after a 400ms compile the next update waits %v, want 400ms", got)
	}
	// Sends that no longer wait: the estimate decays back to min.
	at := t0.Add(time.Second)
	for range 4 {
		p.handed(at, at)
	}
	if got := p.next().Sub(at); got != 100*time.Millisecond {
		t.Fatalf("after the pipeline caught up: %v apart, want 100ms", got)
	}
	// A send stuck for minutes is bounded.
	p.handed(at, at.Add(time.Hour))
	if got := p.cost; got != maxPace {
		t.Fatalf("cost %v, want the bound %v", got, maxPace)
	}
}

// A lone registration on a quiet system (here: the first write after
// start) reaches the pipeline at once, not after the debounce: with a
// debounce of an hour, it arrives well within the test's bound.
func TestLoneWriteNotDelayed(t *testing.T) {
	s := newServiceWith(t, Options{Debounce: time.Hour, Probe: time.Hour})
	ctx := t.Context()
	withWeb(t, s)
	out := running(t, s)
	recv := func(what string) source.Update {
		t.Helper()
		select {
		case u := <-out:
			return u
		case <-time.After(waitBound):
			t.Fatalf("%s: no update within %v", what, waitBound)
			return source.Update{}
		}
	}
	recv("the first update")
	if _, err := s.Register(ctx, "web", model.Endpoint{Address: "10.0.0.7", Port: 80}, 0); err != nil {
		t.Fatal(err)
	}
	u := recv("the registration")
	var found bool
	for _, f := range u.Files {
		found = found || strings.Contains(string(f.Data), "10.0.0.7")
	}
	if !found {
		t.Fatalf("the update does not hold the registration: %v", u.Files)
	}
}
