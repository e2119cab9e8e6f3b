package admin

import (
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/token"
)

// Bounds of the admin API. An attacker who reaches the port can open many
// requests; these keep what each one, and all of them together, can hold.
const (
	// maxInFlight bounds the requests served at once; a request past it
	// waits busyWait for a slot, then gets 503 "busy".
	maxInFlight = 64
	busyWait    = time.Second
	// maxRegistrationsInFlight bounds, apart, the endpoint registrations
	// and deregistrations served at once: small (a body of at most 64
	// KiB, a deregistration's is not read) and many, from every
	// instance of every service. Those in flight together share one
	// store commit and its fsync, so under the general bound 1,000
	// registrants were held to batches of 64. At the bound, a writer
	// trickling bodies holds about 1,024 x (64 KiB + a goroutine) = 80
	// MiB until ReadTimeout; the connections bound (--admin-max-conns)
	// caps them first.
	maxRegistrationsInFlight = 1024
	// maxQuery and maxPath bound the query string and the path.
	maxQuery = 1 << 10
	maxPath  = 2 << 10
)

// guard decides who may call a route: reads take the read or the write
// token, writes only the write token.
type guard struct {
	o     Options
	fails *refusals
}

// tokens are the tokens in force: the files' as last read, or the fixed
// ones.
func (g guard) tokens() token.Pair {
	if g.o.Tokens != nil {
		return g.o.Tokens.Current()
	}
	return token.Pair{Write: g.o.Token, Read: g.o.ReadToken}
}

// bearer is the request's bearer token ("" for none).
func bearer(r *http.Request) string {
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if got == r.Header.Get("Authorization") {
		return ""
	}
	return got
}

// failed is the reason a request presenting got ("" for no bearer token)
// matched neither token.
func failed(got string) string {
	if got == "" {
		return reasonMissing
	}
	return reasonInvalid
}

// opening starts a 401's message: whether a token came and was refused or
// none came, so that a wrong token does not read like a missing one.
func opening(reason string) string {
	if reason == reasonMissing {
		return "no token was sent: "
	}
	return "the token was refused: "
}

// read lets a request through with the read or the write token.
func (g guard) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := bearer(r)
		// Both compared, always: the time taken says nothing of which.
		tok := g.tokens()
		okRead, okWrite := token.Equal(got, tok.Read), token.Equal(got, tok.Write)
		if !okRead && !okWrite {
			reason := failed(got)
			g.fails.refused(r, reason)
			g.refuse(w, opening(reason)+"reads need Authorization: Bearer <token>, the read token ("+where(g.o.ReadTokenFile, "read-token")+") or the write token ("+where(g.o.TokenFile, "admin-token")+")")
			return
		}
		h(w, r)
	}
}

// write lets a request through with the write token only.
func (g guard) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := bearer(r)
		tok := g.tokens()
		okRead, okWrite := token.Equal(got, tok.Read), token.Equal(got, tok.Write)
		switch {
		case okWrite:
			h(w, r)
		case okRead:
			g.fails.refused(r, reasonReadForWrite)
			g.refuse(w, opening(reasonReadForWrite)+"the read token does not authorise writes: writes need Authorization: Bearer <write token> ("+where(g.o.TokenFile, "admin-token")+")")
		default:
			reason := failed(got)
			g.fails.refused(r, reason)
			g.refuse(w, opening(reason)+"writes need Authorization: Bearer <write token> ("+where(g.o.TokenFile, "admin-token")+")")
		}
	}
}

// refuse answers 401 saying which token is needed and where it lives;
// never the token presented, which may be a mistyped real one.
func (g guard) refuse(w http.ResponseWriter, msg string) {
	if tok := g.tokens(); tok.Write == "" && tok.Read == "" {
		msg = "no admin token is configured, so only /healthz, /readyz and /metrics are served"
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="pylon"`)
	writeJSON(w, http.StatusUnauthorized, apiError{Error: msg})
}

// where names a token's file by its base name only: the 401 goes to
// callers who proved nothing, and an absolute path would tell them the
// server's layout (user, mount points). The operator knows where the data
// folder is, and the --admin-*-token-file flags if they moved it.
func where(file, def string) string {
	if file != "" {
		def = filepath.Base(file)
	}
	return "file " + def + " in the server's data folder"
}

// limiter holds the slots of requests in flight: registrations' apart.
type limiter struct {
	slots         chan struct{}
	registrations chan struct{}
	wait          time.Duration
}

func newLimiter(n int, wait time.Duration) *limiter {
	return newLimiterFor(n, maxRegistrationsInFlight, wait)
}

func newLimiterFor(n, registrations int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, n), registrations: make(chan struct{}, registrations), wait: wait}
}

// pool is the slots r takes: an endpoint registration's (POST
// /v1/services/{name}/endpoints) or deregistration's (DELETE
// /v1/services/{name}/endpoints/{addr}) or the general ones.
func (l *limiter) pool(r *http.Request) chan struct{} {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/services/")
	if !ok {
		return l.slots
	}
	name, rest, _ := strings.Cut(rest, "/")
	switch {
	case name == "":
	case r.Method == http.MethodPost && rest == "endpoints":
		return l.registrations
	case (r.Method == http.MethodDelete || r.Method == http.MethodPut) && strings.HasPrefix(rest, "endpoints/") && !strings.Contains(rest[len("endpoints/"):], "/"):
		return l.registrations
	}
	return l.slots
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
		slots := l.pool(r)
		select {
		case slots <- struct{}{}:
		default:
			t := time.NewTimer(l.wait)
			defer t.Stop()
			select {
			case slots <- struct{}{}:
			case <-t.C:
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "busy: too many admin requests in flight; retry shortly"})
				return
			case <-r.Context().Done():
				return
			}
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}
