package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pylon-xds/pylon/internal/pipeline"
)

// TestReadyzDegraded: with the store unreachable /readyz stays 200 (the
// last good config is served) and says "degraded" without the cause, which
// names etcd's addresses and is for token holders; /status carries
// degraded and the reason; both clear when the store is back.
func TestReadyzDegraded(t *testing.T) {
	const cause = "store unreachable since 2026-12-01T06:00:00Z: etcd unreachable at 10.1.2.3:2379: listing: context deadline exceeded"
	var down atomic.Bool
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Degraded: func() (bool, string) {
		if down.Load() {
			return true, cause
		}
		return false, ""
	}}, nil)
	h.src.status = pipeline.Status{Version: "v1"}

	check := func(wantReady map[string]string, wantDegraded bool, wantReason string) {
		t.Helper()
		code, body := h.do(t, "GET", "/readyz", "", nil)
		var ready map[string]string
		if err := json.Unmarshal([]byte(body), &ready); err != nil || code != http.StatusOK {
			t.Fatalf("/readyz: %d %s (%v)", code, body, err)
		}
		if len(ready) != len(wantReady) || ready["status"] != wantReady["status"] || ready["reason"] != wantReady["reason"] {
			t.Fatalf("/readyz: %v, want %v", ready, wantReady)
		}
		if strings.Contains(body, "10.1.2.3") {
			t.Fatalf("the open /readyz shows etcd's address: %s", body)
		}
		code, body = h.do(t, "GET", "/status", readTok, nil)
		var st struct {
			Degraded bool    `json:"degraded"`
			Reason   *string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
			t.Fatalf("/status: %d %s (%v)", code, body, err)
		}
		reason := ""
		if st.Reason != nil {
			reason = *st.Reason
		}
		if st.Degraded != wantDegraded || reason != wantReason {
			t.Fatalf("/status: degraded %v reason %q, want %v %q", st.Degraded, reason, wantDegraded, wantReason)
		}
	}
	check(map[string]string{"status": "ready"}, false, "")
	down.Store(true)
	check(map[string]string{"status": "degraded", "reason": readyzDegraded}, true, cause)
	down.Store(false)
	check(map[string]string{"status": "ready"}, false, "")
}

// TestReadyzNoDegradedSource: without a Degraded source (file mode) the
// probes answer as before.
func TestReadyzNoDegradedSource(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	if code, body := h.do(t, "GET", "/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before any config: %d %s", code, body)
	}
	h.src.status = pipeline.Status{Version: "v1"}
	if code, body := h.do(t, "GET", "/readyz", "", nil); code != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, body := h.do(t, "GET", "/status", writeTok, nil)
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK || st["degraded"] != false {
		t.Fatalf("/status: %d %s (%v)", code, body, err)
	}
}

// TestReadyzDraining: a draining replica answers 503 "draining" even while
// it still serves a config and its store is reachable, so that load
// balancers stop sending it new proxies; before and after it is ready.
func TestReadyzDraining(t *testing.T) {
	var draining atomic.Bool
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Draining: draining.Load}, nil)
	h.src.status = pipeline.Status{Version: "v1"}
	check := func(wantCode int, want map[string]string) {
		t.Helper()
		code, body := h.do(t, "GET", "/readyz", "", nil)
		var got map[string]string
		if err := json.Unmarshal([]byte(body), &got); err != nil || code != wantCode {
			t.Fatalf("/readyz: %d %s (%v), want %d", code, body, err, wantCode)
		}
		if len(got) != len(want) || got["status"] != want["status"] || got["reason"] != want["reason"] {
			t.Fatalf("/readyz: %v, want %v", got, want)
		}
	}
	check(http.StatusOK, map[string]string{"status": "ready"})
	draining.Store(true)
	check(http.StatusServiceUnavailable, map[string]string{"status": "draining", "reason": readyzDraining})
}
