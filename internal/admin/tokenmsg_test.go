package admin

import (
	"net/http"
	"strings"
	"testing"
)

// A 401 says whether a token was sent at all or the one sent was refused,
// for reads and writes, never quoting the token.
func TestUnauthorisedSaysWhetherATokenWasSent(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	const wrong = "wrong-secret-0123456789"
	for _, c := range []struct{ method, path, tok, says string }{
		{"GET", "/v1/objects", "", "no token was sent"},
		{"GET", "/v1/objects", wrong, "the token was refused"},
		{"POST", "/v1/apply", "", "no token was sent"},
		{"POST", "/v1/apply", wrong, "the token was refused"},
		{"POST", "/v1/apply", readTok, "the token was refused: the read token does not authorise writes"},
	} {
		code, body := h.do(t, c.method, c.path, c.tok, []byte(`{}`))
		if code != http.StatusUnauthorized || !strings.Contains(body, c.says) || strings.Contains(body, wrong) || strings.Contains(body, readTok) {
			t.Errorf("%s %s with %q: %d %s; want 401 saying %q", c.method, c.path, c.tok, code, body, c.says)
		}
	}
}
