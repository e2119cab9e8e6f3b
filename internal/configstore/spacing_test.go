package configstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
)

// Under sustained writes the updates are at least Spacing apart when it
// is longer than Debounce (the daemon's grows with the proxies a publish
// reaches), the first at once; every write reaches the pipeline, in the
// update after it.
func TestBurstUpdatesSpacedBySpacing(t *testing.T) {
	const spacing = 300 * time.Millisecond
	s := newServiceWith(t, Options{Debounce: 10 * time.Millisecond, Probe: time.Hour, Spacing: func() time.Duration { return spacing }})
	ctx := t.Context()
	withWeb(t, s)
	out := running(t, s)
	select {
	case <-out:
	case <-time.After(waitBound):
		t.Fatalf("no first update within %v", waitBound)
	}
	type got struct {
		at time.Time
		u  source.Update
	}
	updates := make(chan got, 1000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-out:
				updates <- got{time.Now(), u}
			case <-stop:
				return
			}
		}
	}()
	const writes = 50 // 20 ms apart: a second
	start := time.Now()
	for i := range writes {
		if _, err := s.Register(ctx, "web", model.Endpoint{Address: fmt.Sprintf("10.0.1.%d", i+1), Port: 80}, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the registrants' pace, not a wait for the service
	}
	burst := time.Since(start)
	last := fmt.Sprintf("10.0.1.%d", writes)
	var seen []got
	deadline := time.After(waitBound)
	for len(seen) == 0 || !holds(seen[len(seen)-1].u, last) {
		select {
		case g := <-updates:
			seen = append(seen, g)
		case <-deadline:
			t.Fatalf("the last write (%s) did not reach the pipeline within %v (%d updates)", last, waitBound, len(seen))
		}
	}
	close(stop)
	<-done
	for i := 1; i < len(seen); i++ {
		if gap := seen[i].at.Sub(seen[i-1].at); gap < spacing-20*time.Millisecond {
			t.Errorf("updates %d and %d were %v apart, want at least the spacing %v", i-1, i, gap.Round(time.Millisecond), spacing)
		}
	}
	if limit := 2 + int(burst/spacing); len(seen) > limit {
		t.Fatalf("%d writes over %v made %d updates, want at most %d (one per %v)", writes, burst.Round(time.Millisecond), len(seen), limit, spacing)
	}
	for i := range writes {
		if a := fmt.Sprintf("10.0.1.%d", i+1); !holds(seen[len(seen)-1].u, a) {
			t.Errorf("the last update lacks the write of %s", a)
		}
	}
}

func holds(u source.Update, s string) bool {
	for _, f := range u.Files {
		if strings.Contains(string(f.Data), s) {
			return true
		}
	}
	return false
}
