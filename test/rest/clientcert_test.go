package rest

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
)

// Finding 5 (issue 30), on the REST port: HTTP keeps a connection for
// many polls, each served as the connection's handshake verified it.
// Once the client CA bundle no longer holds the CA of a connection's
// certificate, a poll on that connection is refused (403, naming why) and
// the connection closed, over HTTP/1.1 and h2 alike: its next connection
// handshakes against the new bundle.
func TestRESTPollRefusedAfterCARotation(t *testing.T) {
	p := start(t, daemon.Options{TLSCheckEvery: 20 * time.Millisecond}, "backend", "edge-web")
	var pollers []*poller
	for _, h2 := range []bool{false, true} {
		pl := p.poller(p.client(t, "edge-1", "edge", h2), "/v3/discovery:clusters", "edge-1", "edge")
		if code, body, names := pl.poll(t); code != http.StatusOK || !slices.Equal(names, []string{"edge-web"}) {
			t.Fatalf("h2=%v: before the rotation: %d %v %s", h2, code, names, body)
		}
		pollers = append(pollers, pl)
	}

	certstest.WriteFile(t, filepath.Join(p.dir, "server-ca.crt"), certstest.NewCA(t, "other").PEM)
	for i, pl := range pollers {
		deadline := time.Now().Add(bound)
		var code int
		var body string
		for time.Now().Before(deadline) {
			code, body, _ = pl.poll(t)
			if code != http.StatusOK && code != http.StatusNotModified {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if code != http.StatusForbidden || !strings.Contains(body, "client certificate no longer verifies") {
			t.Fatalf("h2=%v: a poll after its CA left the bundle: %d %s, want 403", i == 1, code, body)
		}
	}
	if n := strings.Count(p.log.String(), "client certificate no longer verifies"); n != 2 {
		t.Errorf("%d log lines for the two refused connections, want 2:\n%s", n, p.log.String())
	}
}

// A long poll that began before the rotation is answered after it: the
// answer is the refusal, not the change it waited for.
func TestRESTLongPollAcrossCARotation(t *testing.T) {
	p := start(t, daemon.Options{TLSCheckEvery: 20 * time.Millisecond, REST: daemon.RESTOptions{Wait: 5 * time.Second}}, "backend", "edge-web")
	// app-1's group sees every cluster: the config change below is news.
	pl := p.poller(p.client(t, "app-1", "apps", false), "/v3/discovery:clusters", "app-1", "apps")
	if code, body, _ := pl.poll(t); code != http.StatusOK {
		t.Fatalf("before the rotation: %d %s", code, body)
	}
	type answer struct {
		code  int
		body  string
		names []string
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		code, body, names, err := pl.try()
		done <- answer{code, body, names, err}
	}()
	certstest.WriteFile(t, filepath.Join(p.dir, "server-ca.crt"), certstest.NewCA(t, "other").PEM)
	p.log.WaitFor(t, "TLS client CAs reloaded", bound)
	if err := os.WriteFile(p.config, []byte(config("backend", "edge-web", "api")), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.code != http.StatusForbidden || !strings.Contains(a.body, "client certificate no longer verifies") {
			t.Fatalf("the long poll across the rotation: %d %v %s %v, want 403", a.code, a.names, a.body, a.err)
		}
	case <-time.After(bound):
		t.Fatal("the long poll did not return")
	}
}
