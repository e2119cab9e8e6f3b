package admin

import (
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Reasons a request is refused for want of a token: a bounded label.
const (
	reasonMissing      = "missing"              // no bearer token
	reasonInvalid      = "invalid"              // a token that is neither
	reasonReadForWrite = "read_token_for_write" // the read token on a write
)

// Refusals logged: a few lines a second at most, so that a client guessing
// tokens cannot fill the log; the metric counts every one.
const (
	refusalLogRate  = 2
	refusalLogBurst = 5
)

// refusals counts and logs the requests the guard refuses. The token
// presented is never logged: it may be a mistyped real one.
type refusals struct {
	count      *prometheus.CounterVec
	log        *slog.Logger
	limit      *rate.Limiter
	suppressed atomic.Int64
}

func newRefusals(reg prometheus.Registerer, log *slog.Logger) *refusals {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pylon_admin_auth_failures_total",
		Help: "Admin API requests refused for want of a valid token, by reason: missing (no bearer token), invalid (a token that is neither the read nor the write token), read_token_for_write.",
	}, []string{"reason"})
	for _, r := range []string{reasonMissing, reasonInvalid, reasonReadForWrite} {
		c.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(c); err != nil {
			// A second handler on the same registry counts into the
			// first's counter.
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				if existing, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
					c = existing
				}
			}
		}
	}
	return &refusals{count: c, log: log, limit: rate.NewLimiter(refusalLogRate, refusalLogBurst)}
}

// refused counts a refusal and logs it unless the rate is exceeded; the
// next line logged says how many were left out.
func (f *refusals) refused(r *http.Request, reason string) {
	f.count.WithLabelValues(reason).Inc()
	if !f.limit.Allow() {
		f.suppressed.Add(1)
		return
	}
	attrs := []any{"reason", reason, "peer", r.RemoteAddr, "method", r.Method, "path", truncated(r.URL.Path)}
	if n := f.suppressed.Swap(0); n > 0 {
		attrs = append(attrs, "suppressed", n)
	}
	f.log.Warn("admin request refused", attrs...)
}

// maxLogged bounds the path a refusal's log line repeats.
const maxLogged = 256

func truncated(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	return s[:maxLogged] + "..."
}
