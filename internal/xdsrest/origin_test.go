package xdsrest_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdsrest"
)

// pollAs posts a cluster poll to r with the given Host and extra headers.
func pollAs(t *testing.T, r *rest, host string, headers map[string]string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.http.URL+cdsPath, bytes.NewReader([]byte(`{"node":{"id":"proxy-1"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("Host %q %v: Access-Control-Allow-Origin %q: no browser page may read a poll", host, headers, got)
	}
	return reply{code: resp.StatusCode, body: b.Bytes()}
}

// Finding 7 (issue 30): a web page can make a browser resolve its own name
// to 127.0.0.1 (DNS rebinding) and read a loopback REST port as its own
// origin, private keys too with --insecure-serve-secrets. A browser then
// sends the page's name as Host: the REST port answers only the names a
// page cannot point at it (localhost, IP addresses, a name without dots
// such as the cluster name Envoy sends) and those configured.
func TestRESTRefusesForeignHost(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{AllowedHosts: []string{"xds.example.com"}}, nil)
	r.xds.Publish(t, cluster("web"))
	_, port, _ := net.SplitHostPort(r.http.Listener.Addr().String())
	for _, host := range []string{
		"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "[::1]:" + port, "10.1.2.3:" + port,
		// What Envoy's REST subscription sends: its cluster's name.
		"pylon_rest", "xds-cluster:" + port,
		"xds.example.com:" + port, "XDS.Example.com",
	} {
		if rep := pollAs(t, r, host, nil); rep.code != http.StatusOK {
			t.Errorf("Host %q: %s, want 200", host, rep)
		}
	}
	for _, host := range []string{
		"attacker.example", "attacker.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.attacker.example",
		"example.com", "sub.xds.example.com", "localhost.",
	} {
		rep := pollAs(t, r, host, nil)
		if rep.code != http.StatusMisdirectedRequest || !strings.Contains(string(rep.body), "--xds-rest-allowed-host") {
			t.Errorf("Host %q: %s, want 421 naming --xds-rest-allowed-host", host, rep)
		}
		if strings.Contains(string(rep.body), "version_info") {
			t.Errorf("Host %q: the refusal carries config: %s", host, rep)
		}
	}
}

// Finding 7 (issue 30): no browser page may poll, whatever origin it
// claims: Envoy and other xDS clients send no Origin nor Sec-Fetch-Site,
// and the REST port serves no page of its own a same-origin request could
// come from.
func TestRESTRefusesCrossOrigin(t *testing.T) {
	r := start(t, xds.Options{}, xdsrest.Options{}, nil)
	r.xds.Publish(t, cluster("web"))
	host := r.http.Listener.Addr().String()
	for _, h := range []map[string]string{
		{"Origin": "http://attacker.example"},
		{"Origin": "null"},
		{"Origin": "http://" + host},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Sec-Fetch-Site": "same-origin"},
	} {
		rep := pollAs(t, r, host, h)
		if rep.code != http.StatusForbidden || strings.Contains(string(rep.body), "version_info") {
			t.Errorf("%v: %s, want 403 without config", h, rep)
		}
	}
	// A user's own navigation (Sec-Fetch-Site: none) is no page's doing.
	if rep := pollAs(t, r, host, map[string]string{"Sec-Fetch-Site": "none"}); rep.code != http.StatusOK {
		t.Errorf("Sec-Fetch-Site: none: %s, want 200", rep)
	}
}
