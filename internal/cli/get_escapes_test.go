package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A node id, client or peer is the client's word (length-bounded, not
// filtered): `pylon get proxies` writes it escaped, so that a client
// cannot retitle, clear or recolour the operator's terminal.
func TestGetProxiesEscapesWhatClientsChose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"streams":[{"node":"n1\u001b]0;owned\u0007","client":"gRPC Go 1.0\u001b[2J\u001b[31mFAKE","peer":"\u001b[31m","group":"g\u001b[1m","since":"2026-12-06T00:00:00Z"}]}`))
	}))
	defer srv.Close()
	var out bytes.Buffer
	a := adminFlags{Addr: srv.Listener.Addr().String(), DataDir: t.TempDir()}
	c := a.Client()
	if err := getProxies(c, &out, output{Format: "table"}); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\x07") {
		t.Fatalf("pylon get proxies wrote control characters a client chose: %q", out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte(`n1\x1b]0;owned\a`)) {
		t.Fatalf("the node id is not shown escaped: %q", out.String())
	}
}
