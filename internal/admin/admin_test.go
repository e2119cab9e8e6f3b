package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	writeTok = "write-token-0123456789"
	readTok  = "read-token-9876543210"
)

// fakes for what the handler reads besides the store; status may block to
// hold a request in flight.
type sources struct {
	status  pipeline.Status
	streams []status.Stream
	fleet   *fleet.Fleet  // what Current returns
	entered chan struct{} // told when Status is called, if not nil
	release chan struct{} // Status waits on it, if not nil
}

func (s *sources) Status() pipeline.Status {
	if s.entered != nil {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.status
}
func (s *sources) Streams() []status.Stream { return s.streams }
func (s *sources) Current() *fleet.Fleet    { return s.fleet }

// harness is the admin API over a real bolt store in t.TempDir().
type harness struct {
	srv   *httptest.Server
	store store.Store
	src   *sources
}

func newHarness(t testing.TB, o Options, l *limiter) *harness {
	t.Helper()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newHarnessOn(t, o, l, st)
}

// newHarnessOn is newHarness over st.
func newHarnessOn(t testing.TB, o Options, l *limiter, st store.Store) *harness {
	t.Helper()
	reg := xdstype.New()
	src := &sources{}
	o.Pipeline, o.Proxies, o.Fleets, o.Registry = src, src, src, reg
	// A real rollout controller gates writes as the daemon wires it.
	var gate func(*fleet.Fleet) error
	if c, ok := o.Rollouts.(interface{ Check(*fleet.Fleet) error }); ok {
		gate = c.Check
	}
	o.Config = configstore.New(configstore.Options{Store: st, Registry: reg, Gate: gate})
	if l == nil {
		l = newLimiter(maxInFlight, busyWait)
	}
	srv := httptest.NewServer(handler(o, l))
	t.Cleanup(srv.Close)
	return &harness{srv: srv, store: st, src: src}
}

// do sends one request; token "" sends none.
func (h *harness) do(t testing.TB, method, path, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	openRoutes = [][2]string{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/ui/"}, {"GET", "/ui/app.js"}}
	readRoutes = [][2]string{
		{"GET", "/status"}, {"GET", "/proxies"}, {"GET", "/proxies/n1"}, {"GET", "/config"},
		{"GET", "/v1/objects"}, {"GET", "/v1/objects/services/web"}, {"GET", "/v1/history"}, {"GET", "/v1/history/1"},
		{"GET", "/debug/pprof/"}, {"GET", "/debug/pprof/cmdline"}, {"GET", "/debug/pprof/symbol"},
		{"GET", "/summary"}, {"GET", "/rollout"}, {"GET", "/v1/groups"},
	}
	writeRoutes = [][2]string{
		{"POST", "/v1/apply"}, {"POST", "/v1/objects/services/web"}, {"PUT", "/v1/objects/services/web"},
		{"DELETE", "/v1/objects/services/web"}, {"POST", "/v1/services/web/endpoints"},
		{"DELETE", "/v1/services/web/endpoints/10.0.0.1:80"}, {"PUT", "/v1/services/web/endpoints/10.0.0.1:80"},
		{"POST", "/v1/rollback/1"}, {"POST", "/v1/relays/relay-1"},
	}
)

// TestTokens checks every route class against every token: open routes
// need none, reads take the read or the write token, writes only the
// write token, and a 401 says where the token lives, never echoing the
// one presented.
func TestTokens(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, TokenFile: "/data/admin-token", ReadTokenFile: "/data/admin-read-token"}, nil)
	const wrong = "wrong-token-presented-xyz"
	for _, rt := range openRoutes {
		if code, body := h.do(t, rt[0], rt[1], "", nil); code == http.StatusUnauthorized {
			t.Errorf("%s %s is open but refused: %s", rt[0], rt[1], body)
		}
	}
	for _, rt := range readRoutes {
		for _, tok := range []string{"", wrong} {
			code, body := h.do(t, rt[0], rt[1], tok, nil)
			if code != http.StatusUnauthorized || !strings.Contains(body, "file admin-read-token in") || strings.Contains(body, "/data/") || strings.Contains(body, wrong) {
				t.Errorf("%s %s with %q: %d %s", rt[0], rt[1], tok, code, body)
			}
		}
		for _, tok := range []string{readTok, writeTok} {
			if code, body := h.do(t, rt[0], rt[1], tok, nil); code == http.StatusUnauthorized {
				t.Errorf("%s %s refuses a good token: %s", rt[0], rt[1], body)
			}
		}
	}
	for _, rt := range writeRoutes {
		for tok, says := range map[string]string{"": "file admin-token in", wrong: "file admin-token in", readTok: "read token does not authorise writes"} {
			code, body := h.do(t, rt[0], rt[1], tok, []byte(`{}`))
			if code != http.StatusUnauthorized || !strings.Contains(body, says) || strings.Contains(body, "/data/") || strings.Contains(body, wrong) || strings.Contains(body, readTok) {
				t.Errorf("%s %s with %q: %d %s", rt[0], rt[1], tok, code, body)
			}
		}
		if code, body := h.do(t, rt[0], rt[1], writeTok, []byte(`{}`)); code == http.StatusUnauthorized {
			t.Errorf("%s %s refuses the write token: %s", rt[0], rt[1], body)
		}
	}
}

// TestTokensUnset: without a read token reads take the write token; with
// no token at all only the open routes answer.
func TestTokensUnset(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	if code, _ := h.do(t, "GET", "/v1/objects", writeTok, nil); code != http.StatusOK {
		t.Fatalf("reads with the write token and no read token: %d", code)
	}
	if code, _ := h.do(t, "GET", "/v1/objects", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("reads without a token: %d", code)
	}
	none := newHarness(t, Options{}, nil)
	for _, rt := range append(append([][2]string{}, readRoutes...), writeRoutes...) {
		code, body := none.do(t, rt[0], rt[1], "", []byte(`{}`))
		if code != http.StatusUnauthorized || !strings.Contains(body, "no admin token is configured") {
			t.Errorf("no token configured, %s %s: %d %s", rt[0], rt[1], code, body)
		}
		// An empty bearer must not match an empty configured token.
		req, _ := http.NewRequest(rt[0], none.srv.URL+rt[1], nil)
		req.Header.Set("Authorization", "Bearer ")
		if resp, err := none.srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("an empty bearer passed %s %s", rt[0], rt[1])
		} else {
			resp.Body.Close()
		}
	}
	for _, rt := range openRoutes {
		if code, _ := none.do(t, rt[0], rt[1], "", nil); code == http.StatusUnauthorized {
			t.Errorf("%s is open", rt[1])
		}
	}
}

// holdSlot sends a request that blocks in the handler, holding its slot
// until release (at the latest when the test ends, before the server
// closes); first gets its status code.
func holdSlot(t *testing.T, h *harness) (release func(), first <-chan int) {
	t.Helper()
	h.src.entered, h.src.release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(h.src.release) }) }
	t.Cleanup(release)
	codes := make(chan int, 1)
	go func() {
		code, _ := h.do(t, "GET", "/status", writeTok, nil)
		codes <- code
	}()
	select {
	case <-h.src.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the handler")
	}
	return release, codes
}

// TestBusy holds the only slot with a request that blocks in the handler:
// the next request waits its short while and gets 503 busy; liveness still
// answers; once the slot is free requests are served again.
func TestBusy(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, newLimiter(1, 20*time.Millisecond))
	release, first := holdSlot(t, h)
	code, body := h.do(t, "GET", "/v1/objects", writeTok, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "busy") {
		t.Fatalf("past the bound: %d %s", code, body)
	}
	if code, _ := h.do(t, "GET", "/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("liveness under load: %d", code)
	}
	release()
	if c := <-first; c != http.StatusOK {
		t.Fatalf("the held request: %d", c)
	}
	h.src.entered = nil
	if code, _ := h.do(t, "GET", "/v1/objects", writeTok, nil); code != http.StatusOK {
		t.Fatalf("after the slot was freed: %d", code)
	}
}

// TestInputBounds: oversized queries and bodies, and parameters that do
// not parse, are refused before anything is stored.
func TestInputBounds(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	svc := []byte(`{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]}`)
	cases := []struct {
		method, path string
		body         []byte
		code         int
	}{
		{"GET", "/v1/objects?x=" + strings.Repeat("a", maxQuery), nil, http.StatusRequestURITooLong},
		{"PUT", "/v1/objects/services/web?revision=abc", svc, http.StatusBadRequest},
		{"PUT", "/v1/objects/services/web?dryRun=maybe", svc, http.StatusBadRequest},
		{"POST", "/v1/objects/services/" + strings.Repeat("n", maxKey+1), svc, http.StatusBadRequest},
		{"GET", "/v1/history/x", nil, http.StatusBadRequest},
		{"POST", "/v1/rollback/-3", nil, http.StatusBadRequest},
		{"POST", "/v1/apply", append([]byte(`{"services":[{"name":"`), bytes.Repeat([]byte("a"), maxBody)...), http.StatusRequestEntityTooLarge},
		{"POST", "/v1/objects/services/web", append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), maxBody)...), http.StatusRequestEntityTooLarge},
		{"POST", "/v1/services/web/endpoints", append([]byte(`{"address":"`), bytes.Repeat([]byte("a"), maxEndpointBody)...), http.StatusRequestEntityTooLarge},
		{"POST", "/v1/services/web/endpoints", []byte(`{"address":"10.0.0.2","port":80} {"x":1}`), http.StatusBadRequest},
		{"POST", "/v1/services/web/endpoints", []byte(`{"address":"10.0.0.2","port":80,"ttl":"9999h"}`), http.StatusBadRequest},
		{"PUT", "/v1/services/web/endpoints/10.0.0.2:80", append([]byte(`{"zone":"`), bytes.Repeat([]byte("a"), maxEndpointBody)...), http.StatusRequestEntityTooLarge},
		{"PUT", "/v1/services/web/endpoints/10.0.0.2:80", []byte(`{"ttl":"9999h"}`), http.StatusBadRequest},
		{"PUT", "/v1/services/web/endpoints/10.0.0.2", []byte(`{}`), http.StatusBadRequest},
	}
	for _, c := range cases {
		code, body := h.do(t, c.method, c.path, writeTok, c.body)
		if code != c.code {
			t.Errorf("%s %.60s: %d, want %d: %.300s", c.method, c.path, code, c.code, body)
		}
	}
	if objs, rev, _ := h.store.List(context.Background()); len(objs) != 0 || rev != 0 {
		t.Fatalf("refused requests stored %d objects", len(objs))
	}
}

// TestApplyRefusesDuplicates: one document naming an object twice is
// refused with both places named.
func TestApplyRefusesDuplicates(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	doc := `{"services":[{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]},{"name":"api","endpoints":[{"address":"10.0.0.2","port":80}]},{"name":"web","endpoints":[{"address":"10.0.0.3","port":80}]}]}`
	code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(doc))
	if code != http.StatusBadRequest || !strings.Contains(body, "services[2]") || !strings.Contains(body, "services[0]") || !strings.Contains(body, `"web"`) {
		t.Fatalf("duplicate services: %d %s", code, body)
	}
	raw := `{"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connectTimeout":"1s"},{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connectTimeout":"2s"}]}`
	code, body = h.do(t, "POST", "/v1/apply", writeTok, []byte(raw))
	if code != http.StatusBadRequest || !strings.Contains(body, "resources[1]") || !strings.Contains(body, "resources[0]") {
		t.Fatalf("duplicate raw clusters: %d %s", code, body)
	}
	if objs, _, _ := h.store.List(context.Background()); len(objs) != 0 {
		t.Fatalf("a refused apply stored %d objects", len(objs))
	}
	// The same document without the duplicate is fine.
	ok := `{"services":[{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]},{"name":"api","endpoints":[{"address":"10.0.0.2","port":80}]}]}`
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(ok)); code != http.StatusOK {
		t.Fatalf("a good apply: %d %s", code, body)
	}
}

func decode(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

// A 401 names the token file by its base name only: it is sent to callers
// who proved nothing, and a path would disclose the server's layout.
func TestTokenFileNamedByBaseName(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, TokenFile: "/srv/secret-layout/pylon-data/admin-token", ReadTokenFile: "/srv/secret-layout/pylon-data/read-token"}, nil)
	code, body := h.do(t, "GET", "/v1/objects", "", nil)
	if code != http.StatusUnauthorized || !strings.Contains(body, "file read-token in the server's data folder") || strings.Contains(body, "secret-layout") {
		t.Fatalf("401 should name read-token by base name only: %d %s", code, body)
	}
	code, body = h.do(t, "POST", "/v1/apply", "", []byte(`{}`))
	if code != http.StatusUnauthorized || !strings.Contains(body, "file admin-token in the server's data folder") || strings.Contains(body, "secret-layout") {
		t.Fatalf("401 should name admin-token by base name only: %d %s", code, body)
	}
}
