package daemon

import (
	"sync/atomic"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// fanout counts the open xDS streams, which each publish under churn
// sends a response to, so that the config sources space their updates by
// what a publish costs the proxies and not only the compile (spacing).
type fanout struct{ streams atomic.Int64 }

// Observe counts the streams opened and closed (a REST poll is one of
// each).
func (f *fanout) Observe(e *status.Event) {
	switch e.Kind {
	case status.StreamOpened:
		f.streams.Add(1)
	case status.StreamClosed:
		f.streams.Add(-1)
	}
}

// Wants none of the per-change events: the stream events come anyway.
func (f *fanout) Wants(status.EventKind) bool { return false }

// perStream is the spacing between publishes under sustained churn that
// each open stream adds. At 10,000 SotW proxies and 1,000 registrations a
// second, publishes 100 ms apart sent each proxy 2 EDS responses a second
// and kept both cores busy (the server and its proxies): changes waited
// 7.4 s at p50 and the admin API took 290 of the 1,000 calls a second
// asked; a second apart, 0.9 responses a second, 1.2 s at p50 and 988
// calls a second (docs/benchmarks-log.md, "the publish pace under
// churn"). So 100 µs a stream: 1,000 proxies keep the 100 ms default.
const perStream = 100 * time.Microsecond

// spacing is the least time between two updates of a burst: quiet, or
// perStream for each open stream, at most most (--debounce-max). The first
// change after a quiet spell is published at once either way.
func (f *fanout) spacing(quiet, most time.Duration) func() time.Duration {
	return func() time.Duration {
		return max(quiet, min(time.Duration(f.streams.Load())*perStream, most))
	}
}
