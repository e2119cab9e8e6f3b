package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/store"
)

// fuzzRoutes are the write routes that take a body, by the fuzzer's
// route byte (its low bits; its high bits pick a fuzzTypes Content-Type).
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/apply"},
	{"POST", "/v1/objects/{kind}/{name}"},
	{"PUT", "/v1/objects/{kind}/{name}"},
	{"POST", "/v1/services/{name}/endpoints"},
	{"DELETE", "/v1/objects/{kind}/{name}"},
}

// fuzzTypes are the Content-Types a body is sent with: none (JSON), and
// each one the API reads.
var fuzzTypes = []string{"", "application/json", "application/yaml", "text/plain"}

// FuzzAdminAPI sends arbitrary bodies, names and queries to the admin
// API's write routes over a real bolt store. Invariants: no panic; no 5xx
// (the only documented ones are 503 busy, which one request at a time
// never meets, and 500 for a failing store); a 4xx stores nothing; every
// answer is JSON; no answer holds a private key block; no request takes
// seconds.
//
//	go test -run '^$' -fuzz FuzzAdminAPI -fuzztime 60s ./internal/admin
func FuzzAdminAPI(f *testing.F) {
	f.Add(uint8(0), "", "", "", []byte(`{"services":[{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]}]}`))
	f.Add(uint8(0), "", "", "dryRun=true", []byte("services:\n- name: a\n  endpoints: [{address: 10.0.0.2, port: 81}]\n- name: a\n"))
	f.Add(uint8(1), "services", "api", "", []byte(`{"name":"api","endpoints":[{"address":"10.0.0.3","port":8080}]}`))
	f.Add(uint8(2), "resources.Cluster", "c", "revision=1", []byte(`{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connectTimeout":"1s"}`))
	f.Add(uint8(3), "", "web", "", []byte(`{"address":"10.0.0.9","port":9,"ttl":"30s"}`))
	f.Add(uint8(4), "services", "web", "revision=abc", []byte(nil))
	f.Add(uint8(1), "resources.Secret", "s", "", []byte(`{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":{"inlineBytes":"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}}}`))
	f.Add(uint8(0), "", "", "", []byte(`{"groups":[{"name":"g","nodes":{"id":"*"}}],"version":"1"}`))
	f.Add(uint8(2<<4|2), "services", "web", "", []byte("name: web\nendpoints:\n- {address: 10.0.0.1, port: 80}\n"))
	f.Add(uint8(2<<4|3), "", "web", "", []byte("address: '[::1]:8080'\nttl: 0s\n"))
	f.Add(uint8(2<<4|1), "services", "new", "", []byte("name: other\n"))

	h := newHarness(f, Options{Token: writeTok}, nil)
	handler := h.srv.Config.Handler
	f.Fuzz(func(t *testing.T, route uint8, kind, name, query string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := rt.path
		path = replace(path, "{kind}", url.PathEscape(kind))
		path = replace(path, "{name}", url.PathEscape(name))
		target := path
		if query != "" {
			target += "?" + url.PathEscape(query)
		}
		req, err := http.NewRequest(rt.method, "http://admin"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Authorization", "Bearer "+writeTok)
		if ct := fuzzTypes[int(route>>4)%len(fuzzTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		before := snapshotStore(t, h.store)
		rec := httptest.NewRecorder()
		start := time.Now()
		handler.ServeHTTP(rec, req)
		took := time.Since(start)
		out := rec.Body.String()
		switch {
		case took > 3*time.Second:
			t.Fatalf("%s %s: %v for %d bytes", rt.method, target, took, len(body))
		case rec.Code >= 500:
			t.Fatalf("%s %s: %d %s", rt.method, target, rec.Code, out)
		case rec.Code >= 400 && snapshotStore(t, h.store) != before:
			t.Fatalf("%s %s: %d, yet the store changed", rt.method, target, rec.Code)
		case !json.Valid(rec.Body.Bytes()) && !muxAnswer(rec.Code):
			t.Fatalf("%s %s: %d, not JSON: %q", rt.method, target, rec.Code, out)
		case redact.String(out) != out:
			t.Fatalf("%s %s: the answer holds a private key: %s", rt.method, target, out)
		}
	})
}

// muxAnswer is a status the router gives before any admin handler runs,
// not as JSON: a redirect to the cleaned path (an empty or dotted
// segment). No such route or method is answered as JSON, like every error.
func muxAnswer(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

func replace(s, old, new string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(old), []byte(new)))
}

// snapshotStore is the store's revision and objects, comparable.
func snapshotStore(t *testing.T, s store.Store) string {
	t.Helper()
	objs, rev, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(struct {
		Rev  int64
		Objs []store.Object
	}{rev, objs})
	return string(b)
}
