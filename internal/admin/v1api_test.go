package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Tests of the /v1 config API's contract: bodies and their names,
// parameters, content types, registrations, audit lines, YAML reads, diffs
// and an unreachable store.

// doH sends one request with the write token and headers.
func (h *harness) doH(t testing.TB, method, path string, body []byte, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+writeTok)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// isAPIError reports whether a body is the API's one error shape.
func isAPIError(hdr http.Header, body string) bool {
	var e apiError
	return strings.HasPrefix(hdr.Get("Content-Type"), "application/json") && json.Unmarshal([]byte(body), &e) == nil && e.Error != ""
}

const clusterURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// a body that names another object than its path is refused, for
// every kind; nothing is stored.
func TestBodyNameMustEqualPath(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	cases := []struct{ path, body, field string }{
		{"/v1/objects/services/new", `{"name":"other","endpoints":[{"address":"10.0.0.1","port":80}]}`, "name"},
		{"/v1/objects/resources.Cluster/new", `{"@type":"` + clusterURL + `","name":"other","connectTimeout":"1s"}`, "name"},
		{"/v1/objects/resources.Listener/new", `{"@type":"` + clusterURL + `","name":"new","connectTimeout":"1s"}`, "@type"},
		{"/v1/objects/routes/new", `{"name":"other"}`, "name"},
		{"/v1/objects/listeners/new", `{"name":"other"}`, "name"},
		{"/v1/objects/secrets/new", `{"name":"other"}`, "name"},
		{"/v1/objects/grpc/new", `{"target":"other"}`, "target"},
		{"/v1/objects/groups/other", `[]`, "name"},
		{"/v1/objects/nonsense/new", `{"name":"new"}`, "kind"},
		{"/v1/objects/endpoints.web/10.0.0.9:80", `{"address":"10.0.0.9","port":80}`, "kind"},
	}
	for _, method := range []string{"PUT", "POST"} {
		for _, c := range cases {
			code, hdr, body := h.doH(t, method, c.path, []byte(c.body))
			if code != http.StatusBadRequest || !isAPIError(hdr, body) || !strings.Contains(body, c.field) {
				t.Errorf("%s %s with %s: %d %s, want 400 naming %s", method, c.path, c.body, code, body, c.field)
			}
		}
	}
	if objs, _, _ := h.store.List(t.Context()); len(objs) != 0 {
		t.Fatalf("refused writes stored %v", objs)
	}
	// The same bodies under their own names are fine.
	for _, c := range []struct{ path, body string }{
		{"/v1/objects/services/new", `{"name":"new","endpoints":[{"address":"10.0.0.1","port":80}]}`},
		{"/v1/objects/resources.Cluster/raw", `{"@type":"` + clusterURL + `","name":"raw","connectTimeout":"1s"}`},
	} {
		if code, _, body := h.doH(t, "PUT", c.path, []byte(c.body)); code != http.StatusOK {
			t.Errorf("PUT %s: %d %s", c.path, code, body)
		}
	}
}

// a ?revision= that does not parse refuses the write instead of
// writing unconditionally.
func TestUnparsedRevisionRefused(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	svc := []byte(`{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]}`)
	for _, method := range []string{"PUT", "DELETE"} {
		code, hdr, body := h.doH(t, method, "/v1/objects/services/web?revision=abc", svc)
		if code != http.StatusBadRequest || !isAPIError(hdr, body) || !strings.Contains(body, "revision") {
			t.Errorf("%s ?revision=abc: %d %s", method, code, body)
		}
	}
	if objs, _, _ := h.store.List(t.Context()); len(objs) != 0 {
		t.Fatalf("stored %v", objs)
	}
}

// what no route serves, and a method a route does not take, are
// answered with the API's JSON error, not the mux's text/plain.
func TestUnknownRoutesAnswerJSON(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	cases := []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/nope", http.StatusNotFound, ""},
		{"GET", "/v1/objects/services", http.StatusNotFound, ""},
		{"GET", "/v1/nope/a/b/c", http.StatusNotFound, ""},
		{"PUT", "/status", http.StatusMethodNotAllowed, "GET"},
		{"DELETE", "/v1/apply", http.StatusMethodNotAllowed, "POST"},
		{"PATCH", "/v1/objects/services/web", http.StatusMethodNotAllowed, "PUT"},
	}
	for _, c := range cases {
		code, hdr, body := h.doH(t, c.method, c.path, nil)
		if code != c.code || !isAPIError(hdr, body) || !strings.Contains(hdr.Get("Allow"), c.allow) {
			t.Errorf("%s %s: %d %s %q, want %d as JSON (Allow %q)", c.method, c.path, code, hdr.Get("Content-Type"), body, c.code, c.allow)
		}
	}
}

const webJSON = `{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]}`

const webYAML = `name: web
endpoints:
- address: 10.0.0.1
  port: 80
`

// bodies are read as JSON or YAML by Content-Type; another type is
// 415.
func TestBodyContentTypes(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	for _, ct := range []string{"application/yaml", "application/x-yaml", "text/yaml; charset=utf-8"} {
		code, _, body := h.doH(t, "PUT", "/v1/objects/services/web", []byte(webYAML), "Content-Type", ct)
		if code != http.StatusOK {
			t.Fatalf("YAML as %s: %d %s", ct, code, body)
		}
	}
	obj, err := h.store.Get(t.Context(), store.Key{Kind: "services", Name: "web"})
	if err != nil || !json.Valid(obj.Body) || !strings.Contains(string(obj.Body), `"address":"10.0.0.1"`) {
		t.Fatalf("a YAML body is stored as JSON: %v %s", err, obj.Body)
	}
	refused := []struct {
		ct, body string
		code     int
	}{
		{"text/plain", `{"name":"web"}`, http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", `{"name":"web"}`, http.StatusUnsupportedMediaType},
		{"application/json", webYAML, http.StatusBadRequest},
		{"application/yaml", "name: [web\n", http.StatusBadRequest},
		{"application/yaml", "name: web\nname: web\n", http.StatusBadRequest},
		{"application/yaml", aliasBomb(), http.StatusBadRequest},
	}
	for _, c := range refused {
		code, hdr, body := h.doH(t, "PUT", "/v1/objects/services/web", []byte(c.body), "Content-Type", c.ct)
		if code != c.code || !isAPIError(hdr, body) {
			t.Errorf("%s body %.40q: %d %s, want %d", c.ct, c.body, code, body, c.code)
		}
	}
	// Apply reads YAML (JSON is YAML) and refuses other types too.
	doc := "services:\n- " + strings.ReplaceAll(strings.TrimSuffix(webYAML, "\n"), "\n", "\n  ") + "\n"
	if code, _, body := h.doH(t, "POST", "/v1/apply", []byte(doc), "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Fatalf("apply as YAML: %d %s", code, body)
	}
	if code, _, body := h.doH(t, "POST", "/v1/apply", []byte(doc), "Content-Type", "text/csv"); code != http.StatusUnsupportedMediaType {
		t.Fatalf("apply as text/csv: %d %s", code, body)
	}
	// An endpoint registration in YAML.
	if code, _, body := h.doH(t, "POST", "/v1/services/web/endpoints", []byte("address: 10.0.0.7\nport: 81\n"), "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Fatalf("register as YAML: %d %s", code, body)
	}
}

// aliasBomb is a YAML body that expands far past the body bound.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n")
	for i := 1; i < 12; i++ {
		b.WriteString("a" + string(rune('0'+i%10)) + string(rune('a'+i)) + ": &a" + string(rune('a'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(",")
			}
			if i == 1 {
				b.WriteString("*a0")
			} else {
				b.WriteString("*a" + string(rune('a'+i-1)))
			}
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// an endpoint registration refuses a zero or negative ttl, an
// empty one and unknown keys; takes IPv6 in either form; and a raw
// Cluster's name gets a refusal that says why.
func TestEndpointRegistration(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	if code, _, body := h.doH(t, "PUT", "/v1/objects/services/web", []byte(webJSON)); code != http.StatusOK {
		t.Fatalf("service: %d %s", code, body)
	}
	if code, _, body := h.doH(t, "PUT", "/v1/objects/resources.Cluster/raw", []byte(`{"@type":"`+clusterURL+`","name":"raw","connectTimeout":"1s"}`)); code != http.StatusOK {
		t.Fatalf("raw cluster: %d %s", code, body)
	}
	refused := []struct{ path, body, want string }{
		{"/v1/services/web/endpoints", `{"address":"10.0.0.2","port":80,"ttl":"0s"}`, "ttl"},
		{"/v1/services/web/endpoints", `{"address":"10.0.0.2","port":80,"ttl":"-5s"}`, "ttl"},
		{"/v1/services/web/endpoints", `{"address":"10.0.0.2","port":80,"ttl":""}`, "ttl"},
		{"/v1/services/web/endpoints", `{"address":"10.0.0.2","port":80,"tll":"5s"}`, `tll`},
		{"/v1/services/web/endpoints", `{"address":"10.0.0.2:80:90","port":80}`, "address"},
		{"/v1/services/raw/endpoints", `{"address":"10.0.0.2","port":80}`, "service raw is a raw Cluster; endpoints can only be registered for model services"},
	}
	for _, c := range refused {
		code, hdr, body := h.doH(t, "POST", c.path, []byte(c.body), "Content-Type", "application/json")
		if code != http.StatusBadRequest || !isAPIError(hdr, body) || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want 400 saying %q", c.path, c.body, code, body, c.want)
		}
	}
	if objs, _, _ := h.store.List(t.Context()); len(objs) != 2 {
		t.Fatalf("refused registrations stored something: %v", objs)
	}
	for _, body := range []string{`{"address":"[::1]:8080"}`, `{"address":"::1","port":8081,"ttl":"30s"}`} {
		if code, _, resp := h.doH(t, "POST", "/v1/services/web/endpoints", []byte(body)); code != http.StatusOK {
			t.Fatalf("IPv6 %s: %d %s", body, code, resp)
		}
	}
	for _, name := range []string{"[::1]:8080", "[::1]:8081"} {
		if _, err := h.store.Get(t.Context(), store.Key{Kind: "endpoints.web", Name: name}); err != nil {
			t.Fatalf("endpoint %s: %v", name, err)
		}
	}
	if code, _, body := h.doH(t, "DELETE", "/v1/services/web/endpoints/[::1]:8080", nil); code != http.StatusOK {
		t.Fatalf("deregister IPv6: %d %s", code, body)
	}
	if code, _, body := h.doH(t, "DELETE", "/v1/services/web/endpoints/::1", nil); code != http.StatusBadRequest || !strings.Contains(body, "[::1]:8080") {
		t.Fatalf("deregister without a port: %d %s", code, body)
	}
}

// logBuffer is a slog handler's output, safe to read while written.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON log records with msg.
func (l *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// every write is an INFO audit line naming the token (never the
// token itself), method, path, what changed, the new revision and the
// client; reads are not.
func TestWritesAudited(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil)
	if code, _, body := h.doH(t, "PUT", "/v1/objects/services/web", []byte(webJSON)); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	h.doH(t, "PUT", "/v1/objects/services/new", []byte(`{"name":"other"}`))
	h.do(t, "GET", "/v1/objects", readTok, nil)
	h.do(t, "PUT", "/v1/objects/services/web", readTok, []byte(`{}`))
	lines := logs.lines(t, "admin write")
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2 (the write and the refused write): %v", len(lines), lines)
	}
	ok, refused := lines[0], lines[1]
	want := map[string]any{"level": "INFO", "token": "write", "token_id": tokenID(writeTok), "method": "PUT", "path": "/v1/objects/services/web", "changed": "services/web", "revision": float64(1), "status": float64(200)}
	for k, v := range want {
		if ok[k] != v {
			t.Errorf("audit %s = %v, want %v (line %v)", k, ok[k], v, ok)
		}
	}
	if c, _ := ok["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
		t.Errorf("audit client = %v", ok["client"])
	}
	if refused["status"] != float64(400) || refused["path"] != "/v1/objects/services/new" {
		t.Errorf("refused write's line: %v", refused)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if strings.Contains(logs.b.String(), writeTok) || strings.Contains(logs.b.String(), readTok) {
		t.Fatalf("a token in the log: %s", logs.b.String())
	}
}

// objects and history read as YAML when asked, bodies as mappings.
func TestReadsAsYAML(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	if code, _, body := h.doH(t, "PUT", "/v1/objects/services/web", []byte(webJSON)); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	for _, c := range []struct{ path, accept string }{
		{"/v1/objects?format=yaml", ""}, {"/v1/objects", "application/yaml"},
		{"/v1/objects/services/web?format=yaml", ""}, {"/v1/history/1", "text/yaml"},
	} {
		code, hdr, body := h.doH(t, "GET", c.path, nil, "Accept", c.accept)
		var doc map[string]any
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/yaml" || yaml.Unmarshal([]byte(body), &doc) != nil {
			t.Fatalf("%s (Accept %q): %d %s %s", c.path, c.accept, code, hdr.Get("Content-Type"), body)
		}
		if !strings.Contains(body, "name: web") || !strings.Contains(body, "address: 10.0.0.1") {
			t.Errorf("%s: the body is not shown as YAML:\n%s", c.path, body)
		}
	}
	if code, hdr, body := h.doH(t, "GET", "/v1/objects?format=xml", nil); code != http.StatusBadRequest || !isAPIError(hdr, body) {
		t.Fatalf("?format=xml: %d %s", code, body)
	}
	// JSON stays the default: the body is an object, not base64.
	code, _, body := h.doH(t, "GET", "/v1/objects/services/web", nil)
	var obj struct{ Body map[string]any }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &obj) != nil || obj.Body["name"] != "web" {
		t.Fatalf("JSON read: %d %s", code, body)
	}
}

// GET /v1/diff is a unified diff of the YAML of two revisions,
// redacted; registered endpoints are left out, as the history leaves
// them out, unless ?endpoints=true.
func TestDiff(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	put := func(path, body string) {
		t.Helper()
		if code, _, resp := h.doH(t, "PUT", path, []byte(body)); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", path, code, resp)
		}
	}
	put("/v1/objects/services/web", webJSON)                                   // revision 1
	put("/v1/objects/services/web", strings.Replace(webJSON, "80", "8080", 1)) // 2
	if code, _, body := h.doH(t, "POST", "/v1/apply", []byte(keyDocument())); code != http.StatusOK {
		t.Fatalf("apply keys: %d %s", code, body) // 3
	}
	if code, _, body := h.doH(t, "POST", "/v1/services/web/endpoints", []byte(`{"address":"10.9.9.9","port":9}`)); code != http.StatusOK {
		t.Fatalf("register: %d %s", code, body) // 4, no history entry
	}

	var d diffBody
	code, _, body := h.doH(t, "GET", "/v1/diff?from=1&to=2", nil)
	decode(t, body, &d)
	want := "diff revision 1 revision 2\n--- revision 1\n+++ revision 2\n@@ -1,5 +1,5 @@\n # services/web\n endpoints:\n - address: 10.0.0.1\n-  port: 80\n+  port: 8080\n name: web\n"
	if code != http.StatusOK || d.Diff != want || d.From != 1 || d.To != 2 || d.Endpoints {
		t.Fatalf("diff 1..2: %d %+v\nwant diff:\n%s", code, d, want)
	}
	// To defaults to the current revision; the registration is hidden.
	code, _, body = h.doH(t, "GET", "/v1/diff?from=2", nil)
	d = diffBody{}
	decode(t, body, &d)
	if code != http.StatusOK || d.To != 4 || !strings.Contains(d.Diff, "+# resources.Secret/s") || strings.Contains(d.Diff, "10.9.9.9") || !strings.Contains(d.Note, "endpoints=true") {
		t.Fatalf("diff 2..current: %d %+v", code, d)
	}
	if leaks(body) || !strings.Contains(d.Diff, "privateKey") {
		t.Fatalf("the diff shows a key, or not the object holding it:\n%s", d.Diff)
	}
	code, _, body = h.doH(t, "GET", "/v1/diff?from=2&endpoints=true", nil)
	d = diffBody{}
	decode(t, body, &d)
	if code != http.StatusOK || !d.Endpoints || !strings.Contains(d.Diff, "+# endpoints.web/10.9.9.9:9") {
		t.Fatalf("diff with endpoints: %d %+v", code, d)
	}
	// The bare diff, for patch tools; and a read with the read token.
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/diff?from=1&to=2&format=diff", nil)
	req.Header.Set("Authorization", "Bearer "+readTok)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(raw) != want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/x-diff") {
		t.Fatalf("bare diff: %d %q", resp.StatusCode, raw)
	}
	for _, q := range []string{"", "from=x", "from=1&to=0", "from=1&endpoints=maybe", "from=99"} {
		code, hdr, body := h.doH(t, "GET", "/v1/diff?"+q, nil)
		if code/100 != 4 || !isAPIError(hdr, body) {
			t.Errorf("diff ?%s: %d %s", q, code, body)
		}
	}
}

// downStore is a store whose backend cannot be reached.
type downStore struct{ store.Store }

func (downStore) List(context.Context) ([]store.Object, int64, error) {
	return nil, 0, fmt.Errorf("etcd unreachable: %w", store.ErrUnavailable)
}

// A store that cannot be reached answers 503 with Retry-After, as JSON:
// nothing is wrong with the request.
func TestStoreUnavailableIs503(t *testing.T) {
	reg := xdstype.New()
	src := &sources{}
	srv := httptest.NewServer(Handler(Options{Token: writeTok, Pipeline: src, Proxies: src, Fleets: src, Registry: reg,
		Config: configstore.New(configstore.Options{Store: downStore{}, Registry: reg})}))
	t.Cleanup(srv.Close)
	h := &harness{srv: srv}
	for _, c := range [][2]string{{"GET", "/v1/objects"}, {"PUT", "/v1/objects/services/web"}} {
		code, hdr, body := h.doH(t, c[0], c[1], []byte(webJSON))
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !isAPIError(hdr, body) || !strings.Contains(body, "etcd unreachable") {
			t.Errorf("%s %s: %d %v %s", c[0], c[1], code, hdr, body)
		}
	}
}

// A prune's audit line names what it deleted, in an attribute of its own,
// however many objects the document has; and what the write changed, not
// every object of the document (those stored as they are were not
// written).
func TestPruneAuditNamesItsDeletions(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, Options{Token: writeTok, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil)
	doc := func(names ...string) []byte {
		var items []string
		for _, n := range names {
			items = append(items, fmt.Sprintf(`{"name": %q, "endpoints": [{"address": "10.0.0.1", "port": 80}]}`, n))
		}
		return []byte(`{"services": [` + strings.Join(items, ",") + `]}`)
	}
	var all []string
	for i := range 30 {
		all = append(all, fmt.Sprint("s", i))
	}
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, doc(all...)); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/apply?prune=true", writeTok, doc(append(all[:25:25], "n1")...)); code != http.StatusOK {
		t.Fatalf("prune: %d %s", code, body)
	}
	// The same prune again changes nothing, and its line says so.
	if code, body := h.do(t, "POST", "/v1/apply?prune=true", writeTok, doc(append(all[:25:25], "n1")...)); code != http.StatusOK {
		t.Fatalf("prune again: %d %s", code, body)
	}
	lines := logs.lines(t, "admin write")
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3", len(lines))
	}
	if again := lines[2]; again["unchanged"] != true || again["changed"] != nil || again["deleted"] != nil || again["revision"] != nil {
		t.Errorf("the audit line of a prune that changed nothing: %v", again)
	}
	prune := lines[1]
	if prune["deleted"] != "services/s25,services/s26,services/s27,services/s28,services/s29" || prune["changed"] != "+ services/n1" {
		t.Errorf("the prune's audit line: changed %v, deleted %v; want + services/n1, and s25 to s29 deleted", prune["changed"], prune["deleted"])
	}
}
