package interop

import (
	"path/filepath"
	"testing"
	"time"
)

const method = "/pylon.interop.Greeter/SayHello"

var beta = map[string]string{"x-user-group": "beta"}

// TestInterop: each gRPC xDS client, bootstrapped by `pylon bootstrap
// --grpc`, joins its group by the metadata and locality of that bootstrap,
// routes by the model's header match, and follows a config change that
// swaps both routes.
func TestInterop(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T, bootstrapPath string, bootstrapJSON []byte) client
	}{
		{"grpc-go", func(t *testing.T, _ string, js []byte) client { return startGoClient(t, js) }},
		{"c-core", func(t *testing.T, path string, _ []byte) client {
			return startSubprocess(t, path, python(t), "client.py", "xds:///greeter")
		}},
		{"grpc-js", func(t *testing.T, path string, _ []byte) client {
			return startSubprocess(t, path, nodeJS(t), "client.js", "xds:///greeter")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			ports := startBackends(t, 2)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, greeterConfig(c.name, ports, "v2", "v1"))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)

			expect(t, cl, nil, "backend-0", "first RPC, default route")
			first := time.Since(start)
			expect(t, cl, beta, "backend-1", "x-user-group: beta")

			// Swap: the default goes to v2, beta to v1.
			changed := time.Now()
			writeAtomically(t, cfg, greeterConfig(c.name, ports, "v1", "v2"))
			waitFor(t, cl, nil, "backend-1", "the default route after the change")
			followed := time.Since(changed)
			expect(t, cl, beta, "backend-0", "x-user-group: beta after the change")
			for range 5 {
				expect(t, cl, nil, "backend-1", "the default route after the change")
			}
			t.Logf("%s: first RPC answered %s after start, change followed in %s, %s in all",
				c.name, first.Round(time.Millisecond), followed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// expect makes one RPC and fails unless backend answered it.
func expect(t *testing.T, cl client, md map[string]string, backend, what string) {
	t.Helper()
	got, err := cl.call(method, md)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != backend {
		t.Fatalf("%s: answered by %s, want %s", what, got, backend)
	}
}

// waitFor makes RPCs until backend answers one, within bound.
func waitFor(t *testing.T, cl client, md map[string]string, backend, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	var last string
	for time.Now().Before(deadline) {
		got, err := cl.call(method, md)
		if err == nil && got == backend {
			return
		}
		last = got
		if err != nil {
			last = err.Error()
		}
	}
	t.Fatalf("%s: not answered by %s within %s; last: %s", what, backend, bound, last)
}
