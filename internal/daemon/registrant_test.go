package daemon

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// registrant renews one endpoint's lease through the admin API with a Go
// http.Client on one transport, as a service instance would, counting the
// connections it dialled.
type registrant struct {
	r      *running
	token  string
	client *http.Client
	dials  atomic.Int32
}

func newRegistrant(t *testing.T, r *running) *registrant {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(r.dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	// Go's default transport: idle connections kept for 90s.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	g := &registrant{r: r, token: strings.TrimSpace(string(tok)), client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	if err := g.send(t, http.MethodPost, "/v1/apply", `{"services": [{"name": "api"}]}`, nil); err != nil {
		t.Fatalf("apply the service: %v", err)
	}
	return g
}

// send makes one call and returns its error (a transport error or a status
// other than 200), failing the test only if the request cannot be built.
func (g *registrant) send(t *testing.T, method, path, body string, header http.Header) error {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+g.r.adminAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	req.Header.Set("Content-Type", "application/json")
	trace := &httptrace.ClientTrace{ConnectDone: func(_, _ string, err error) {
		if err == nil {
			g.dials.Add(1)
		}
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return &statusError{code: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}
	return nil
}

type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return http.StatusText(e.code) + ": " + e.body }

// renewEvery renews n times, waiting period after each answer, and returns
// the errors met.
func (g *registrant) renewEvery(t *testing.T, n int, period time.Duration, method, path, body string, header http.Header) []error {
	t.Helper()
	var errs []error
	timer := time.NewTimer(period)
	defer timer.Stop()
	for i := range n {
		if err := g.send(t, method, path, body, header); err != nil {
			errs = append(errs, err)
			t.Logf("renewal %d: %v", i, err)
		}
		timer.Reset(period)
		<-timer.C
	}
	return errs
}

// A registrant renewing its lease every 5s (the admin server's idle
// timeout until issue 35) with Go's default transport, through the
// connection it keeps alive, for a minute (15s with -short): every
// renewal succeeds, over the one connection, because the server keeps
// an idle connection longer than common clients reuse one (Go's 90s).
// With a 5s idle timeout the server closed the connection just as the
// client reused it: a POST was answered with EOF, or a new dial.
func TestRegistrantRenewingEveryFiveSecondsKeepsItsConnection(t *testing.T) {
	const period = 5 * time.Second
	n := 12
	if testing.Short() {
		n = 3
	}
	r := startDaemon(t, Options{Store: StoreBolt})
	g := newRegistrant(t, r)
	errs := g.renewEvery(t, n, period, http.MethodPost, "/v1/services/api/endpoints", `{"address": "127.0.0.1", "port": 9001, "ttl": "30s"}`, nil)
	if len(errs) > 0 {
		t.Errorf("%d of %d renewals failed, the first: %v", len(errs), n, errs[0])
	}
	if d := g.dials.Load(); d != 1 {
		t.Errorf("the service's apply and %d renewals dialled %d connections, want 1 kept alive", n, d)
	}
}

// A registrant renewing with PUT at exactly the idle period, against a
// server whose idle timeout is short (100ms, for a test that covers fifty
// idle periods in seconds): the server closes each connection just as the
// client reuses it, and the client retries the PUT on a new connection
// itself (Go's transport retries a request marked idempotent with an
// Idempotency-Key header when a reused connection was closed under it),
// so no renewal fails. The registration is in place at the end. What Go
// retries on is the header, which a POST may carry too; PUT is what makes
// that retry right, the same call stored twice being one registration.
func TestRegistrantRenewingWithPutAtTheIdlePeriodSeesNoErrors(t *testing.T) {
	const period, n = 100 * time.Millisecond, 50
	r := startDaemon(t, Options{Store: StoreBolt, AdminLimits: AdminLimits{IdleTimeout: period}})
	g := newRegistrant(t, r)
	g.dials.Store(0)
	header := http.Header{"Idempotency-Key": {"renew-api-127.0.0.1:9002"}}
	errs := g.renewEvery(t, n, period, http.MethodPut, "/v1/services/api/endpoints/127.0.0.1:9002", `{"ttl": "30s"}`, header)
	if len(errs) > 0 {
		t.Errorf("%d of %d renewals failed, the first: %v", len(errs), n, errs[0])
	}
	// The server did close idle connections under the client: the test
	// met the race it is about.
	if d := g.dials.Load(); d < 2 {
		t.Errorf("%d renewals at the idle period dialled %d connection(s): the server never closed one", n, d)
	}
	if got := r.get(t, "/v1/objects"); !strings.Contains(got, "127.0.0.1:9002") {
		t.Errorf("the endpoint renewed with PUT is not stored: %.400s", got)
	}
}
