package xds

import (
	"bytes"
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
