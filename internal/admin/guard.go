package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// Bounds of the admin API. An attacker who reaches the port can open many
// requests; these keep what each one, and all of them together, can hold.
const (
	// maxInFlight bounds the requests served at once; a request past it
	// waits busyWait for a slot, then gets 503 "busy".
	maxInFlight = 64
	busyWait    = time.Second
	// maxQuery and maxPath bound the query string and the path.
	maxQuery = 1 << 10
	maxPath  = 2 << 10
)

// guard decides who may call a route: reads take the read or the write
// token, writes only the write token.
type guard struct{ o Options }

// sameToken compares a presented token with a configured one in constant
// time, lengths included (both are hashed first). An empty configured
// token matches nothing.
func sameToken(got, want string) bool {
	if want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// bearer is the request's bearer token.
func bearer(r *http.Request) string {
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return got
}

// read lets a request through with the read or the write token.
func (g guard) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := bearer(r)
		// Both compared, always: the time taken says nothing of which.
		okRead, okWrite := sameToken(got, g.o.ReadToken), sameToken(got, g.o.Token)
		if !okRead && !okWrite {
			g.refuse(w, "reads need Authorization: Bearer <token>, the read token ("+where(g.o.ReadTokenFile, "admin-read-token")+") or the write token ("+where(g.o.TokenFile, "admin-token")+")")
			return
		}
		h(w, r)
	}
}

// write lets a request through with the write token only.
func (g guard) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := bearer(r)
		okRead, okWrite := sameToken(got, g.o.ReadToken), sameToken(got, g.o.Token)
		switch {
		case okWrite:
			h(w, r)
		case okRead:
			g.refuse(w, "the read token does not authorise writes: writes need Authorization: Bearer <write token> ("+where(g.o.TokenFile, "admin-token")+")")
		default:
			g.refuse(w, "writes need Authorization: Bearer <write token> ("+where(g.o.TokenFile, "admin-token")+")")
		}
	}
}

// refuse answers 401 saying which token is needed and where it lives;
// never the token presented, which may be a mistyped real one.
func (g guard) refuse(w http.ResponseWriter, msg string) {
	if g.o.Token == "" && g.o.ReadToken == "" {
		msg = "no admin token is configured, so only /healthz, /readyz and /metrics are served"
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="pylon"`)
	writeJSON(w, http.StatusUnauthorized, apiError{Error: msg})
}

// where names a token's file, or the default file in the data folder. The
// path is made absolute: the reader of the error runs the CLI from another
// folder than the server's.
func where(file, def string) string {
	if file != "" {
		if abs, err := filepath.Abs(file); err == nil {
			file = abs
		}
		return "in " + file
	}
	return "in the data folder's " + def + " file"
}

// limiter holds the slots of requests in flight.
type limiter struct {
	slots chan struct{}
	wait  time.Duration
}

func newLimiter(n int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, n), wait: wait}
}

// bounded serves next with at most cap(l.slots) requests at once and
// refuses oversized paths and queries before any handler parses them.
// Liveness and readiness skip the bound: a busy Pylon is alive, and a
// probe that fails under load would restart it at the worst moment.
func bounded(l *limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.RawQuery) > maxQuery || len(r.URL.Path) > maxPath {
			writeJSON(w, http.StatusRequestURITooLong, apiError{Error: "the path is limited to 2 KiB and the query to 1 KiB"})
			return
		}
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		t := time.NewTimer(l.wait)
		defer t.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-t.C:
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "busy: too many admin requests in flight; retry shortly"})
			return
		case <-r.Context().Done():
			return
		}
		defer func() { <-l.slots }()
		next.ServeHTTP(w, r)
	})
}
