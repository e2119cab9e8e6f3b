package xds

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestOnceSetIsBounded(t *testing.T) {
	o := newOnceSet(2, nil)
	if !o.first("a") || o.first("a") {
		t.Fatal("a key is new once")
	}
	o.first("b")
	o.first("c") // evicts "a"
	if len(o.seen) != 2 {
		t.Fatalf("%d keys kept, want 2", len(o.seen))
	}
	if !o.first("a") {
		t.Fatal("an evicted key is new again")
	}
}

// A client inventing a new node id per stream gets a new key each time:
// the rate limit, not the key, bounds its lines, and the dropped ones are
// said once logging resumes.
func TestOnceSetRateLimitsNewKeys(t *testing.T) {
	var buf bytes.Buffer
	o := newOnceSet(100000, slog.New(slog.NewTextHandler(&buf, nil)))
	allowed := 0
	for i := range 10 * logLinesBurst {
		if o.first(fmt.Sprintf("nocert\x00node-%d", i)) {
			allowed++
		}
	}
	// The burst, plus what the limiter refills while the loop runs.
	if allowed < logLinesBurst || allowed > logLinesBurst+logLinesPerSecond {
		t.Fatalf("%d of %d new keys let through, want about the burst of %d", allowed, 10*logLinesBurst, logLinesBurst)
	}
	if o.suppressed == 0 {
		t.Fatal("nothing counted as dropped")
	}
	// Logging resumes once the limiter refills; the next line says what
	// was dropped.
	o.limit.SetBurst(logLinesBurst + 1)
	o.limit.SetLimit(1e9)
	if !o.first("nocert\x00late") {
		t.Fatal("a new key after the limiter refilled was dropped")
	}
	if !strings.Contains(buf.String(), "dropped=") {
		t.Fatalf("no line says how many were dropped: %q", buf.String())
	}
}

// A key whose line the rate limit dropped is not remembered: once the
// limiter refills, its next occurrence is logged. The line saying what was
// dropped is written without the set's lock held.
func TestOnceSetDroppedKeyLoggedLater(t *testing.T) {
	h := &lockProbe{}
	o := newOnceSet(100, slog.New(h))
	h.o = o
	o.limit.SetBurst(1)
	o.limit.SetLimit(0)
	if !o.first("a") {
		t.Fatal("the first key was dropped")
	}
	if o.first("b") {
		t.Fatal("the limiter let a second line through")
	}
	o.limit.SetLimit(1e9)
	o.limit.SetBurst(10)
	if !o.first("b") {
		t.Fatal("a key dropped by the rate limit stays unlogged after the limiter refilled")
	}
	if o.first("b") {
		t.Fatal("a logged key is new again")
	}
	if h.lines != 1 || h.locked != 0 {
		t.Fatalf("%d dropped-lines lines, %d written under the lock; want 1, 0", h.lines, h.locked)
	}
}

// lockProbe is a log handler noting whether o's lock is held as it writes.
type lockProbe struct {
	o             *onceSet
	lines, locked int
}

func (h *lockProbe) Enabled(context.Context, slog.Level) bool { return true }
func (h *lockProbe) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lockProbe) WithGroup(string) slog.Handler            { return h }
func (h *lockProbe) Handle(context.Context, slog.Record) error {
	h.lines++
	if h.o.mu.TryLock() {
		h.o.mu.Unlock()
	} else {
		h.locked++
	}
	return nil
}
