package daemon

import (
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// fanout spaces the config sources' updates under churn by what the last
// ones cost the proxies: every publish is a response to each proxy whose
// resources it changed, so a burst's publishes are spaced by the
// responses the streams sent since the previous update (the fan-out of
// the publish before), not only by the compile's time.
type fanout struct {
	// responses is the responses every stream has sent so far
	// (status.Tracker.Totals): read once an update, it walks the streams.
	responses func() uint64
	mu        sync.Mutex
	last      uint64
	started   bool
}

// perResponse is the spacing each response of the previous update's
// fan-out adds. At 10,000 SotW proxies and 1,000 registrations a second,
// publishes 100 ms apart sent each proxy 2 EDS responses a second and kept
// both cores busy (the server and its proxies): changes waited 7.4 s at
// p50 and the admin API took 290 of the 1,000 calls a second asked; a
// second apart, 0.9 responses a second, 1.2 s at p50 and 988 calls a
// second (docs/benchmarks-log.md, "the publish pace under churn"). So a
// publish that reaches 10,000 proxies waits a second for the next; one
// that reaches 1,000 (a change to one service of ten a proxy holds, at
// 10 changes a second) the 100 ms default.
const perResponse = 100 * time.Microsecond

// spacing is the least time between two updates of a burst: the
// responses sent since it was last asked times perResponse, at least
// quiet (--debounce) and at most most (--debounce-max). The first change
// after a quiet spell is published at once either way.
func (f *fanout) spacing(quiet, most time.Duration) func() time.Duration {
	return func() time.Duration {
		n := f.responses()
		f.mu.Lock()
		sent := n - f.last
		if !f.started || n < f.last {
			sent = 0 // nothing to go by yet
		}
		f.last, f.started = n, true
		f.mu.Unlock()
		return max(quiet, min(time.Duration(sent)*perResponse, most))
	}
}

// sentResponses is the responses t's streams have sent, of every type.
func sentResponses(t *status.Tracker) func() uint64 {
	return func() uint64 {
		var n uint64
		for _, x := range t.Totals() {
			n += x.Responses
		}
		return n
	}
}
