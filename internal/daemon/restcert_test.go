package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// currentCert serves a poll whose certificate verifies against the
// current client CAs, and refuses (403, the connection closed, logged
// once per connection) one whose CA left them or that expired; a poll
// without a verified certificate is not its business.
func TestRESTCurrentCert(t *testing.T) {
	ca, other := certstest.NewCA(t, "clients"), certstest.NewCA(t, "other")
	valid := ca.Issue(t, certstest.Client("spiffe://example.org/ns/edge/sa/edge-1")).Cert
	expiredLeaf := certstest.Client("spiffe://example.org/ns/edge/sa/edge-2")
	expiredLeaf.NotAfter = time.Now().Add(-time.Minute)
	expired := ca.Issue(t, expiredLeaf).Cert
	var logs bytes.Buffer
	pool := certstest.Pool(ca)
	h := currentCert{
		next: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("served")) }),
		cas:  func() *x509.CertPool { return pool },
		log:  slog.New(slog.NewTextHandler(&logs, nil)),
	}
	poll := func(cert *x509.Certificate, conn context.Context) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(conn, http.MethodPost, "/v3/discovery:clusters", nil)
		if cert != nil {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca.Cert}}}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	served := func(w *httptest.ResponseRecorder) bool { return w.Code == http.StatusOK && w.Body.String() == "served" }
	refused := func(w *httptest.ResponseRecorder) bool {
		return w.Code == http.StatusForbidden && w.Header().Get("Connection") == "close" && strings.Contains(w.Body.String(), "no longer verifies")
	}

	conn := withConnCert(context.Background(), nil)
	if w := poll(valid, conn); !served(w) {
		t.Fatalf("a valid certificate: %d %q", w.Code, w.Body)
	}
	if w := poll(nil, withConnCert(context.Background(), nil)); !served(w) {
		t.Fatalf("no certificate: %d %q", w.Code, w.Body)
	}
	if w := poll(expired, withConnCert(context.Background(), nil)); !refused(w) {
		t.Fatalf("an expired certificate: %d %q", w.Code, w.Body)
	}
	pool = certstest.Pool(other)
	for range 2 {
		if w := poll(valid, conn); !refused(w) {
			t.Fatalf("after its CA left the pool: %d %q", w.Code, w.Body)
		}
	}
	for reason, want := range map[string]int{"client_cert_expired": 1, "client_cert_revoked": 1} {
		if n := strings.Count(logs.String(), "reason="+reason); n != want {
			t.Errorf("%s logged %d times, want %d:\n%s", reason, n, want, logs.String())
		}
	}
}

// The certificate check's writer lets xdsrest reach the connection: a
// poll's body deadline is set through it, not silently dropped.
func TestRESTCertWriterReachesTheConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &certWriter{ResponseWriter: w, ok: func() bool { return true }}
		if err := http.NewResponseController(cw).SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			http.Error(cw, err.Error(), http.StatusInternalServerError)
			return
		}
		cw.Write([]byte("ok"))
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("setting the read deadline through certWriter: %d %s", resp.StatusCode, b)
	}
}
