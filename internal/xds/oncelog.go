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

// first reports whether key is new, and remembers it, and whether the rate
// limit lets its line through.
func (o *onceSet) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[key]; ok {
		return false
	}
	if old := o.ring[o.next]; old != "" {
		delete(o.seen, old)
	}
	o.ring[o.next] = key
	o.next = (o.next + 1) % len(o.ring)
	o.seen[key] = struct{}{}
	if !o.limit.Allow() {
		o.suppressed++
		return false
	}
	if o.suppressed > 0 {
		o.log.Warn("log lines about clients were dropped by the rate limit; the metrics and /proxies still count every event", "dropped", o.suppressed, "limit_per_second", logLinesPerSecond)
		o.suppressed = 0
	}
	return true
}
