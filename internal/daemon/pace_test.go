package daemon

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// A burst's publishes are spaced by the streams they reach: the quiet
// period for a small fleet, 100 µs a stream beyond it, never more than
// --debounce-max; streams that close no longer count.
func TestSpacingGrowsWithOpenStreams(t *testing.T) {
	f := &fanout{}
	spacing := f.spacing(100*time.Millisecond, time.Second)
	open := func(n int, kind status.EventKind) {
		for range n {
			f.Observe(&status.Event{Kind: kind})
		}
	}
	for _, c := range []struct {
		open, closed int
		want         time.Duration
	}{
		{0, 0, 100 * time.Millisecond},
		{1000, 0, 100 * time.Millisecond},
		{5000, 0, 500 * time.Millisecond},
		{10000, 0, time.Second},
		{100000, 0, time.Second},
		{5000, 3000, 200 * time.Millisecond},
	} {
		f.streams.Store(0)
		open(c.open, status.StreamOpened)
		open(c.closed, status.StreamClosed)
		if got := spacing(); got != c.want {
			t.Errorf("%d streams opened, %d closed: spacing %v, want %v", c.open, c.closed, got, c.want)
		}
	}
}
