package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// keyMarker is the body of a PEM private key a proxy quotes in a NACK; no
// log line, event or dump may show it.
const keyMarker = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDmarker30"

// Finding 8 (issue 30): a NACK's error_detail is the proxy's text, and a
// proxy that fails to load a key quotes it. It reaches the log, the status
// (/proxies) and CSDS redacted.
func TestNACKDetailRedactedInLog(t *testing.T) {
	r := startDaemon(t, Options{})
	st := xdstest.OpenADS(t, xdstest.Dial(t, r.xdsAddr), xdstest.Node("nacker"))
	st.Request(xdstype.ClusterURL)
	resp := st.RecvType(xdstype.ClusterURL)
	detail := "Failed to load private key: -----BEGIN PRIVATE KEY-----\n" + keyMarker + "\n-----END PRIVATE KEY-----\n: bad"
	st.NACK(resp, "", detail)
	waitFor(t, 10*time.Second, "the NACK in the log", func() bool { return strings.Contains(r.out.String(), "proxy rejected config") })
	if strings.Contains(r.out.String(), keyMarker) {
		t.Errorf("the log shows the key a NACK quoted:\n%s", r.out.String())
	}
	var body string
	waitFor(t, 10*time.Second, "the NACK in /proxies", func() bool {
		body = r.get(t, "/proxies")
		return strings.Contains(body, "NACKED") || strings.Contains(body, "Failed to load")
	})
	if strings.Contains(body, keyMarker) {
		t.Errorf("/proxies shows the key a NACK quoted:\n%s", body)
	}
}

// get reads path on the admin API with the read token and returns the body.
func (r *running) get(t *testing.T, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// Finding 7 (issue 30): --xds-rest-allowed-host takes plain names; a
// scheme, port or wildcard would never equal a Host and is refused at
// start, naming the flag.
func TestRESTAllowedHostFlag(t *testing.T) {
	for _, good := range []string{"xds.example.com", "pylon_rest", "XDS-1.internal"} {
		o := Options{REST: RESTOptions{Addr: "127.0.0.1:0", AllowedHosts: []string{good}}}
		if err := checkREST(o, &security{}, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	for _, bad := range []string{"", "http://xds.example.com", "xds.example.com:18080", "*.example.com", "a b"} {
		o := Options{REST: RESTOptions{Addr: "127.0.0.1:0", AllowedHosts: []string{bad}}}
		if err := checkREST(o, &security{}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--xds-rest-allowed-host") {
			t.Errorf("%q: %v, want an error naming --xds-rest-allowed-host", bad, err)
		}
	}
}

// status returns the status code of a request with token to path on the
// admin API (POST with body when body is not nil).
func (r *running) status(t *testing.T, method, path, tok string) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode
}

// csdsCode is the gRPC code of a CSDS call on the xDS port with tok.
func (r *running) csdsCode(t *testing.T, tok string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	_, err := statusv3.NewClientStatusDiscoveryServiceClient(xdstest.Dial(t, r.xdsAddr)).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	return status.Code(err)
}

// writeToken replaces a token file as a rotation does: written aside, then
// renamed over it.
func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Finding 8 (issue 30): a token rotated on disk takes effect within
// seconds, for the admin API and CSDS, and the old token stops working; a
// token file that becomes empty or equal to the other keeps the previous
// good tokens and is logged, never with a token.
func TestTokenFileRotation(t *testing.T) {
	r := startDaemon(t, Options{})
	oldRead := r.readToken
	writeFile, readFile := filepath.Join(r.dataDir, "admin-token"), filepath.Join(r.dataDir, "read-token")
	oldWrite := readTokenFile(t, writeFile)
	if r.status(t, http.MethodGet, "/proxies", oldRead) != http.StatusOK || r.csdsCode(t, oldRead) != codes.OK {
		t.Fatal("the read token does not work before the rotation")
	}
	const newRead, newWrite = "rotated-read-token-0123456789abcdef", "rotated-write-token-0123456789abcdef"
	writeToken(t, readFile, newRead)
	writeToken(t, writeFile, newWrite)
	waitFor(t, 10*time.Second, "the rotated read token to work", func() bool {
		return r.status(t, http.MethodGet, "/proxies", newRead) == http.StatusOK
	})
	for _, old := range []string{oldRead, oldWrite} {
		if code := r.status(t, http.MethodGet, "/proxies", old); code != http.StatusUnauthorized {
			t.Errorf("an old token still reads after the rotation: %d", code)
		}
	}
	if code := r.status(t, http.MethodGet, "/proxies", newWrite); code != http.StatusOK {
		t.Errorf("the rotated write token does not read: %d", code)
	}
	if code := r.csdsCode(t, newRead); code != codes.OK {
		t.Errorf("CSDS refuses the rotated read token: %v", code)
	}
	if code := r.csdsCode(t, oldRead); code != codes.Unauthenticated {
		t.Errorf("CSDS takes the old read token after the rotation: %v", code)
	}

	// An empty file, then a read token equal to the write token: the
	// previous good pair stays, and the log says why without a token.
	writeToken(t, readFile, "")
	waitFor(t, 10*time.Second, "the empty token file logged", func() bool {
		r.status(t, http.MethodGet, "/proxies", newRead)
		return strings.Contains(r.out.String(), "is empty")
	})
	writeToken(t, readFile, newWrite)
	waitFor(t, 10*time.Second, "the equal tokens logged", func() bool {
		r.status(t, http.MethodGet, "/proxies", newRead)
		return strings.Contains(r.out.String(), "are the same")
	})
	if code := r.status(t, http.MethodGet, "/proxies", newRead); code != http.StatusOK {
		t.Errorf("a bad rotation dropped the good read token: %d", code)
	}
	if code := r.status(t, http.MethodPost, "/v1/rollback/1", newRead); code != http.StatusUnauthorized {
		t.Errorf("the read token writes after the write token was copied into its file: %d", code)
	}
	for _, tok := range []string{oldRead, oldWrite, newRead, newWrite} {
		if strings.Contains(r.out.String(), tok) {
			t.Errorf("the log shows a token:\n%s", r.out.String())
		}
	}
}

// readTokenFile reads a token file as the test's reference.
func readTokenFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Finding 8 (issue 30): a read token equal to the write token would let
// every reader write: refused at start, naming both files.
func TestReadEqualsWriteTokenRefused(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	writeToken(t, filepath.Join(data, "admin-token"), "same-token-0123456789")
	writeToken(t, filepath.Join(data, "read-token"), "same-token-0123456789")
	cfg := filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(cfg, examples.Quickstart(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Started anyway, it stops at once: the test fails on its nil error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(ctx, Options{ConfigPath: cfg, DataDir: data, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Resync: -1,
		OnReady: func(string, string) { cancel() }})
	if err == nil || !strings.Contains(err.Error(), "admin-token") || !strings.Contains(err.Error(), "read-token") || strings.Contains(err.Error(), "same-token") {
		t.Fatalf("Run with equal tokens: %v; want an error naming both files and no token", err)
	}
}
