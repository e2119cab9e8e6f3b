package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// keyMarker is the body of a PEM private key a proxy quotes in a NACK; no
// log line, event or dump may show it.
const keyMarker = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDmarker30"

// Finding 8 (issue 30): a NACK's error_detail is the proxy's text, and a
// proxy that fails to load a key quotes it. It reaches the log, the status
// (/proxies) and CSDS redacted.
func TestFinding8_NACKDetailRedactedInLog(t *testing.T) {
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
func TestFinding7_RESTAllowedHostFlag(t *testing.T) {
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
