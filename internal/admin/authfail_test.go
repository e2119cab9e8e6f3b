package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a log destination the test reads while the handler writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Refused admin requests are counted by reason and
// logged with the peer and path, a few lines a second at most (the next
// line says how many were left out), never with the token presented.
func TestFailedLoginsLoggedAndCounted(t *testing.T) {
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	h := newHarness(t, Options{
		Token: writeTok, ReadToken: readTok, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, nil)
	const wrong = "wrong-secret-0123456789"
	for range 20 {
		h.do(t, http.MethodGet, "/status", "", nil)
		h.do(t, http.MethodGet, "/proxies", wrong, nil)
	}
	for range 10 {
		h.do(t, http.MethodPost, "/v1/rollback/1", readTok, nil)
	}
	// A good token is no failure.
	if code, body := h.do(t, http.MethodGet, "/status", readTok, nil); code != http.StatusOK {
		t.Fatalf("read token: %d %s", code, body)
	}
	for reason, want := range map[string]float64{"missing": 20, "invalid": 20, "read_token_for_write": 10} {
		if got := authFailures(t, reg, reason); got != want {
			t.Errorf("pylon_admin_auth_failures_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	lines := strings.Count(logs.String(), "admin request refused")
	if lines == 0 || lines > 10 {
		t.Errorf("%d log lines for 50 refusals in a burst; want at least one and a few at most:\n%s", lines, logs.String())
	}
	for _, want := range []string{"peer=127.0.0.1:", "path=/proxies", "reason=missing", "reason=invalid"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	// Once the limit allows a line again, it says how many were left out.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "suppressed=") {
		if time.Now().After(deadline) {
			t.Fatalf("no line says how many refusals went unlogged:\n%s", logs.String())
		}
		h.do(t, http.MethodGet, "/proxies", wrong, nil)
		time.Sleep(50 * time.Millisecond)
	}
	for _, tok := range []string{wrong, readTok, writeTok} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the log shows a token presented:\n%s", logs.String())
		}
	}
}

// authFailures is the counter's value for reason.
func authFailures(t *testing.T, g prometheus.Gatherer, reason string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pylon_admin_auth_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
