package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/redact"
)

// maxAuditKeys bounds the objects one audit line names: an apply of ten
// thousand objects is one line, not a megabyte.
const maxAuditKeys = 20

// auditRecord is what a write handler tells the audit line: what it
// changes and the revision it made.
type auditRecord struct {
	changes []string
	count   int
	// deleted are the objects a prune deleted, apart: a document's
	// objects must not crowd them out of the line.
	deleted      []string
	deletedCount int
	revision     int64
	dryRun       bool
	// recorded: the write made a history entry (registrations and
	// renewals do not), the only writes whose author history shows.
	recorded bool
	// unchanged: the write changed no object and stored nothing.
	unchanged bool
}

type auditKey struct{}

// noteChanges records the objects a write changes (kind/name).
func noteChanges(r *http.Request, keys ...string) {
	if rec, ok := r.Context().Value(auditKey{}).(*auditRecord); ok {
		rec.count += len(keys)
		for _, k := range keys {
			if len(rec.changes) < maxAuditKeys {
				rec.changes = append(rec.changes, redact.String(truncate(k)))
			}
		}
	}
}

// noteObjects replaces the objects noted with what a config write did,
// from its result's object lines: those created or changed ("+ kind/name",
// "~ kind/name") as changed, those deleted apart. Objects written as they
// were stored are left out: nothing happened to them.
func noteObjects(r *http.Request, lines []string) {
	rec, ok := r.Context().Value(auditKey{}).(*auditRecord)
	if !ok {
		return
	}
	rec.changes, rec.count = nil, 0
	for _, l := range lines {
		if k, gone := strings.CutPrefix(l, "- "); gone {
			rec.deletedCount++
			if len(rec.deleted) < maxAuditKeys {
				rec.deleted = append(rec.deleted, redact.String(truncate(k)))
			}
			continue
		}
		noteChanges(r, l)
	}
}

// noteResult records what a write did.
func noteResult(r *http.Request, res configstore.Result) {
	if rec, ok := r.Context().Value(auditKey{}).(*auditRecord); ok {
		rec.revision, rec.dryRun, rec.recorded, rec.unchanged = res.Revision, res.DryRun, res.Recorded, res.Unchanged
	}
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// tokenID names a token in logs without revealing it: the first 8 hex
// digits of its SHA-256, enough to tell a rotated token from the old one
// and useless for guessing a token of 32 random bytes.
func tokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:4])
}

// audited logs every write that passed the write token as one INFO line,
// "admin write": which token, the method and path, the objects it changes
// (and, apart, those a prune deleted), the new revision, the outcome, and the client's address (the connection's,
// not a header a client can set). Refused writes are logged too: an
// attempt is part of the audit trail.
func audited(log *slog.Logger, who *authors, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &auditRecord{}
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, rec)))
		if rec.recorded && sw.code < 300 {
			who.note(rec.revision, author(r))
		}
		if !log.Enabled(r.Context(), slog.LevelInfo) {
			return
		}
		attrs := []any{
			"token", "write", "token_id", tokenID(bearer(r)),
			"method", r.Method, "path", redact.String(r.URL.Path),
			"status", sw.code, "client", r.RemoteAddr,
			"duration", time.Since(start).Round(time.Microsecond),
		}
		if rec.count > 0 {
			changed := strings.Join(rec.changes, ",")
			if rec.count > len(rec.changes) {
				changed += ",..."
			}
			attrs = append(attrs, "changed", changed, "objects", rec.count)
		}
		if rec.deletedCount > 0 {
			deleted := strings.Join(rec.deleted, ",")
			if rec.deletedCount > len(rec.deleted) {
				deleted += ",..."
			}
			attrs = append(attrs, "deleted", deleted, "deletions", rec.deletedCount)
		}
		if rec.revision != 0 {
			attrs = append(attrs, "revision", rec.revision)
		}
		if rec.dryRun {
			attrs = append(attrs, "dry_run", true)
		}
		if rec.unchanged {
			attrs = append(attrs, "unchanged", true)
		}
		log.Info("admin write", attrs...)
	}
}

// maxAuthors bounds the revisions whose writer is remembered.
const maxAuthors = 1000

// authors remembers who made the revisions written through this replica
// since it started, for the history's "by": the store's history has no
// author. Bounded: the oldest are forgotten first.
type authors struct {
	mu    sync.Mutex
	by    map[int64]string
	order []int64
}

func newAuthors() *authors { return &authors{by: map[int64]string{}} }

// author names a write's token (by its id, as the audit line does) and the
// connection's address, without its port.
func author(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "write token " + tokenID(bearer(r)) + " from " + host
}

func (a *authors) note(rev int64, who string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.by[rev]; !ok {
		a.order = append(a.order, rev)
	}
	a.by[rev] = who
	for len(a.order) > maxAuthors {
		delete(a.by, a.order[0])
		a.order = a.order[1:]
	}
}

func (a *authors) get(rev int64) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.by[rev]
}
