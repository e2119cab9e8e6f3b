package configstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/store"
)

// health remembers whether the store answered the last call: a shared
// store (etcd) can be away while this replica keeps serving the last good
// config, and /readyz and status must say so, and why.
type health struct {
	mu    sync.Mutex
	since time.Time // zero: reachable
	cause string    // the last failure, redacted
	log   *slog.Logger
	now   func() time.Time
}

// observe records the outcome of a store call. Only ErrUnavailable marks
// the store unreachable; any other answer, an error included (a conflict,
// not found), shows it reachable. A caller's own cancellation says
// nothing about the store.
func (h *health) observe(err error) {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		h.down(err)
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
	default:
		h.up()
	}
}

func (h *health) down(err error) {
	msg := redact.String(err.Error())
	h.mu.Lock()
	first := h.since.IsZero()
	if first {
		h.since = h.now()
	}
	h.cause = msg
	h.mu.Unlock()
	if first {
		h.log.Warn("store unreachable: serving the last good config; writes and registrations are refused until it is back", "err", msg)
	}
}

func (h *health) up() {
	h.mu.Lock()
	since := h.since
	h.since, h.cause = time.Time{}, ""
	h.mu.Unlock()
	if !since.IsZero() {
		h.log.Info("store reachable again: catching up", "unreachable_for", h.now().Sub(since).Round(time.Millisecond).String())
	}
}

// Degraded reports whether the store was unreachable at the last call to
// it, and if so since when and why ("store unreachable since
// 2026-12-01T06:00:00Z: etcd unreachable at ...: ..."), for /readyz and
// status. Meanwhile the last good config keeps serving, and writes and
// registrations are refused with store.ErrUnavailable. The service checks
// a shared store on its own while nothing else calls it (Options.Probe),
// so the answer is at most that old.
func (s *Service) Degraded() (bool, string) {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		return false, ""
	}
	return true, fmt.Sprintf("store unreachable since %s: %s", h.since.UTC().Format(time.RFC3339), h.cause)
}

// observed is the service's view of its store: every call's outcome
// feeds health, and every write's keys are noted in w (see written).
type observed struct {
	store.Store
	h *health
	w *written
}

func (o observed) List(ctx context.Context) ([]store.Object, int64, error) {
	objs, rev, err := o.Store.List(ctx)
	o.h.observe(err)
	return objs, rev, err
}

func (o observed) Get(ctx context.Context, k store.Key) (store.Object, error) {
	obj, err := o.Store.Get(ctx, k)
	o.h.observe(err)
	return obj, err
}

func (o observed) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	rev, err := o.Store.Commit(ctx, changes, entry, keep)
	o.h.observe(err)
	o.w.mark(changes)
	return rev, err
}

func (o observed) Touch(ctx context.Context, k store.Key, expires time.Time) error {
	err := o.Store.Touch(ctx, k, expires)
	o.h.observe(err)
	o.w.markKey(k)
	return err
}

func (o observed) History(ctx context.Context) ([]store.Entry, error) {
	h, err := o.Store.History(ctx)
	o.h.observe(err)
	return h, err
}

func (o observed) At(ctx context.Context, rev int64) (store.Entry, error) {
	e, err := o.Store.At(ctx, rev)
	o.h.observe(err)
	return e, err
}
