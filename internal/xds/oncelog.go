package xds

import (
	"log/slog"
	"sync"

	"golang.org/x/time/rate"
)

// onceSet remembers keys so that a message is logged once per key across
// streams: a proxy that reconnects and NACKs the same version again, or a
// storm of proxies in no group, does not flood the log. It is bounded: the
// oldest keys are forgotten first.
//
// Once per key is not enough on its own: the keys hold what clients send
// (node ids), so a client inventing a new id per stream would still get a
// line per stream. A rate limit over every key caps that; the lines it
// drops are counted and said in one line when logging resumes.
type onceSet struct {
	mu         sync.Mutex
	seen       map[string]struct{}
	ring       []string
	next       int
	limit      *rate.Limiter
	log        *slog.Logger
	suppressed int
}

// Client-triggered log lines allowed: a sustained 20 a second, bursts of
// 200 (a reconnect storm of misconfigured proxies stays visible).
const (
	logLinesPerSecond = 20
	logLinesBurst     = 200
)

func newOnceSet(size int, log *slog.Logger) *onceSet {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &onceSet{
		seen:  map[string]struct{}{},
		ring:  make([]string, size),
		limit: rate.NewLimiter(logLinesPerSecond, logLinesBurst),
		log:   log,
	}
}

// first reports whether key is new and the rate limit lets its line
// through, and then remembers it. A key whose line the limit drops is not
// remembered: its next occurrence may still be logged, rather than lost
// until the ring forgets it. The line about dropped lines is written after
// the lock is released: a slow log sink must not hold up every stream.
func (o *onceSet) first(key string) bool {
	dropped, ok := o.admit(key)
	if dropped > 0 {
		o.log.Warn("log lines about clients were dropped by the rate limit; the metrics and /proxies still count every event", "dropped", dropped, "limit_per_second", logLinesPerSecond)
	}
	return ok
}

// admit is first under the lock; dropped is the count of lines dropped
// since the last one let through, to be said now (0 for nothing to say).
func (o *onceSet) admit(key string) (dropped int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, seen := o.seen[key]; seen {
		return 0, false
	}
	if !o.limit.Allow() {
		o.suppressed++
		return 0, false
	}
	if old := o.ring[o.next]; old != "" {
		delete(o.seen, old)
	}
	o.ring[o.next] = key
	o.next = (o.next + 1) % len(o.ring)
	o.seen[key] = struct{}{}
	dropped, o.suppressed = o.suppressed, 0
	return dropped, true
}
