package daemon

import (
	"testing"
	"time"
)

// A burst's publishes are spaced by the responses the streams sent since
// the last update: the quiet period when few were (a change a few proxies
// hold), 100 µs a response beyond it, never more than --debounce-max.
func TestSpacingFollowsTheResponsesSent(t *testing.T) {
	var sent uint64
	f := &fanout{responses: func() uint64 { return sent }}
	spacing := f.spacing(100*time.Millisecond, time.Second)
	sent = 40000 // the first configs: nothing to go by yet
	if got := spacing(); got != 100*time.Millisecond {
		t.Fatalf("first spacing %v, want the quiet period", got)
	}
	for _, c := range []struct {
		since uint64
		want  time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1000, 100 * time.Millisecond},
		{5000, 500 * time.Millisecond},
		{10000, time.Second},
		{100000, time.Second},
		{300, 100 * time.Millisecond},
	} {
		sent += c.since
		if got := spacing(); got != c.want {
			t.Errorf("%d responses since the last update: spacing %v, want %v", c.since, got, c.want)
		}
	}
}
