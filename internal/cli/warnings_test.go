package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/pipeline"
)

// waitingConfig routes to a service with no endpoints yet.
const waitingConfig = `services:
- name: waiting
listeners:
- { name: http, port: 10000, routes: all }
routes:
- name: all
  virtual_hosts:
  - { name: any, domains: ["*"], routes: [{ to: [{ service: waiting }] }] }
`

// pylon validate accepts a config that routes to a service with no
// endpoints (exit 0) and prints the warning with its file and line.
func TestValidatePrintsWarnings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	if err := os.WriteFile(cfg, []byte(waitingConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run("validate", cfg)
	if code != 0 || !strings.HasPrefix(out, "ok: version ") {
		t.Fatalf("exit %d, %q %q", code, out, stderr)
	}
	if !strings.Contains(out, "warning: "+cfg+":") || !strings.Contains(out, `RouteConfiguration "all"`) || !strings.Contains(out, `Cluster "waiting", whose endpoint set is empty`) {
		t.Fatalf("no warning naming the file, the route table and the cluster:\n%s", out)
	}
}

// pylon status shows the served config's warnings after a refusal, if
// any, and before the proxies.
func TestStatusShowsWarnings(t *testing.T) {
	var b strings.Builder
	w := diag.Diagnostic{File: "pylon.yaml", Line: 6, Type: "RouteConfiguration", Name: "all", Field: "virtual_hosts[0].routes[0].route.cluster", Message: "sends traffic to Cluster \"waiting\", whose endpoint set is empty"}
	writeWarnings(&b, pipeline.Status{Version: "v1", Warnings: []diag.Diagnostic{w}})
	if got := b.String(); !strings.Contains(got, "1 CONFIG WARNING") || !strings.Contains(got, "  "+w.String()+"\n") {
		t.Fatalf("status:\n%s", got)
	}
	b.Reset()
	writeWarnings(&b, pipeline.Status{Version: "v1"})
	if b.Len() != 0 {
		t.Fatalf("status without warnings: %q", b.String())
	}
}

// Many warnings are shown as their count and the first
// pipeline.MaxWarnings, as the server keeps them, by pylon status and
// pylon validate alike.
func TestManyWarningsShowTheFirstAndTheCount(t *testing.T) {
	const n = 3 * pipeline.MaxWarnings
	var b strings.Builder
	b.WriteString("services:\n- name: waiting\nlisteners:\n- { name: http, port: 10000, routes: all }\nroutes:\n- name: all\n  virtual_hosts:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - { name: v%d, domains: [\"v%d.example\"], routes: [{ to: [{ service: waiting }] }] }\n", i, i)
	}
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	more := fmt.Sprintf("and %d more warnings", n-pipeline.MaxWarnings)
	code, out, stderr := run("validate", cfg)
	if code != 0 || strings.Count(out, "warning: ") != pipeline.MaxWarnings || !strings.Contains(out, more) {
		t.Errorf("validate: exit %d, %d warning lines, want %d and %q:\n%s%s", code, strings.Count(out, "warning: "), pipeline.MaxWarnings, more, out, stderr)
	}

	w := diag.Diagnostic{File: "pylon.yaml", Line: 6, Type: "RouteConfiguration", Name: "all", Message: "m"}
	first := make([]diag.Diagnostic, pipeline.MaxWarnings)
	for i := range first {
		first[i] = w
	}
	var st strings.Builder
	writeWarnings(&st, pipeline.Status{Version: "v1", Warnings: first, WarningsTotal: n})
	if got := st.String(); !strings.Contains(got, fmt.Sprintf("%d CONFIG WARNINGS", n)) || strings.Count(got, w.String()) != pipeline.MaxWarnings || !strings.Contains(got, more) {
		t.Errorf("status:\n%s", got)
	}
}

// pylon status shows the groups whose connected gRPC clients their
// `clients:` does not state (GET /status's clientWarnings), and nothing
// without any.
func TestStatusShowsClientWarnings(t *testing.T) {
	var b strings.Builder
	w := `group "web" states clients [grpc-go] but grpc-js 1.14.1 is connected: what it receives is not checked against what those accept; add them to ` + "`clients:`"
	writeClientWarnings(&b, statusBody{ClientWarnings: []string{w}})
	if got := b.String(); !strings.Contains(got, "1 CLIENT WARNING (proxies connected now):\n") || !strings.Contains(got, "  "+w+"\n") {
		t.Fatalf("status:\n%s", got)
	}
	b.Reset()
	writeClientWarnings(&b, statusBody{})
	if b.Len() != 0 {
		t.Fatalf("status without client warnings: %q", b.String())
	}
}
