package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// PUT /v1/services/NAME/endpoints/ADDR:PORT registers the endpoint its
// path names, with the body's attributes, and sent again only renews it:
// the same answer, no new revision, so that a client may retry it.
func TestEndpointPutRegistersThenRenews(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	if code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(`{"services":[{"name":"web"}]}`)); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	put := func(path, body string) (int, int64, string) {
		t.Helper()
		code, b := h.do(t, "PUT", path, writeTok, []byte(body))
		var res struct{ Revision int64 }
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(b), &res); err != nil {
				t.Fatalf("PUT %s: %v: %s", path, err, b)
			}
		}
		return code, res.Revision, b
	}
	code, first, body := put("/v1/services/web/endpoints/10.0.0.2:80", `{"ttl":"30s","weight":3}`)
	if code != http.StatusOK || first == 0 {
		t.Fatalf("first PUT: %d revision %d: %s", code, first, body)
	}
	code, again, body := put("/v1/services/web/endpoints/10.0.0.2:80", `{"ttl":"30s","weight":3}`)
	if code != http.StatusOK || again != first {
		t.Fatalf("the same PUT again: %d revision %d, want 200 and revision %d (a renewal): %s", code, again, first, body)
	}
	if code, _, body := put("/v1/services/web/endpoints/[::1]:8080", `{"address":"::1","port":8080}`); code != http.StatusOK {
		t.Fatalf("PUT of an IPv6 endpoint, the body naming the path's: %d %s", code, body)
	}
	_, objs := h.do(t, "GET", "/v1/objects", writeTok, nil)
	for _, want := range []string{`"10.0.0.2:80"`, `"weight": 3`, `"[::1]:8080"`} {
		if !strings.Contains(objs, want) {
			t.Errorf("stored objects lack %s: %.600s", want, objs)
		}
	}
	// The body naming another endpoint than the path is refused, saying
	// why, and stores nothing.
	code, _, body = put("/v1/services/web/endpoints/10.0.0.3:80", `{"address":"10.0.0.4","port":80}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "10.0.0.4:80") || !strings.Contains(body, "the path 10.0.0.3:80") {
		t.Errorf("a body naming another endpoint: %d %s", code, body)
	}
	if _, objs := h.do(t, "GET", "/v1/objects", writeTok, nil); strings.Contains(objs, "10.0.0.3") || strings.Contains(objs, "10.0.0.4") {
		t.Errorf("a refused PUT stored an endpoint: %.600s", objs)
	}
}
