package interop

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/status"
)

// TestClientsShowAsTheirImplementation: each client, once it made an RPC,
// is shown in /proxies as the implementation its user agent names, as a
// group's `clients:` names it, at the version tested here (grpcrules.Versions;
// grpc-js reports @grpc/grpc-js-xds's version).
func TestClientsShowAsTheirImplementation(t *testing.T) {
	for _, c := range []struct {
		name, impl, version string
		start               func(t *testing.T, bootstrapPath string, bootstrapJSON []byte) client
	}{
		{"grpc-go", string(grpcrules.Go), grpc.Version, func(t *testing.T, _ string, js []byte) client { return startGoClient(t, js) }},
		{"c-core", string(grpcrules.Core), "29.0.0 Python 1.51.1", func(t *testing.T, path string, _ []byte) client {
			return startSubprocess(t, path, python(t), "client.py", "xds:///greeter")
		}},
		{"grpc-js", string(grpcrules.JS), "1.14.1", func(t *testing.T, path string, _ []byte) client {
			return startSubprocess(t, path, nodeJS(t), "client.js", "xds:///greeter")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports := startBackends(t, 2)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, greeterConfig(c.name, ports, "v2", "v1"))
			o := daemontest.FileMode(cfg)
			d := daemontest.Start(t, o)
			path, js := writeBootstrap(t, c.name, d.XDS)
			cl := c.start(t, path, js)
			expect(t, cl, nil, "backend-0", "first RPC")
			got := [2]string{}
			if !within(func() bool {
				for _, s := range proxies(t, d) {
					if s.Node == "interop-"+c.name && s.Gone == nil {
						got = [2]string{s.Implementation, s.ImplementationVersion}
					}
				}
				return got == [2]string{c.impl, c.version}
			}) {
				t.Fatalf("%s shows as %q, want %s %s", c.name, got, c.impl, c.version)
			}
		})
	}
}

// proxies reads the daemon's /proxies.
func proxies(t *testing.T, d *daemontest.Daemon) []status.Stream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+d.Admin+"/proxies", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token(t, "read-token"))
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Streams []status.Stream `json:"streams"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("/proxies: %v: %s", err, b)
	}
	return body.Streams
}
