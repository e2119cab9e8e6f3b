package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// The README's run command: `pylon serve` with no config serves the
// embedded quickstart over xDS, and stops cleanly on a signal.
func TestServeEmbeddedDefault(t *testing.T) {
	dataDir := t.TempDir()
	readToken := filepath.Join(t.TempDir(), "reads")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json", "--id", "cli-test",
			"--read-token-file", readToken}, io.Discard, pw)
		pw.Close()
	}()
	// The daemon logs its bound addresses; read them from the log.
	var addrs struct{ XDS, Admin string }
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		var rec map[string]any
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec["msg"] == "pylon serving" {
			addrs.XDS, _ = rec["xds"].(string)
			addrs.Admin, _ = rec["admin"].(string)
			break
		}
	}
	go io.Copy(io.Discard, pr) // keep draining the log
	if addrs.XDS == "" {
		t.Fatalf("serve never logged its addresses (exit %d)", <-done)
	}

	s := xdstest.OpenADS(t, xdstest.Dial(t, addrs.XDS), xdstest.Node("quickstart"))
	s.Request(xdstype.ListenerURL)
	resp := s.RecvType(xdstype.ListenerURL)
	if len(resp.Resources) != 2 || resp.GetControlPlane().GetIdentifier() != "cli-test" {
		t.Fatalf("quickstart LDS: %d listeners, identifier %q", len(resp.Resources), resp.GetControlPlane().GetIdentifier())
	}
	r, err := http.Get("http://" + addrs.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("readyz %d", r.StatusCode)
	}
	s.Close()
	// Both tokens were generated, readable by Pylon's user alone; the read
	// token where --read-token-file said.
	for _, p := range []string{readToken, filepath.Join(dataDir, "admin-token")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("token file %s: %v, %v", p, fi, err)
		}
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after a graceful stop, want 0", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeRefusesBadInitialConfig(t *testing.T) {
	code, _, stderr := run("serve", "--config", "../compile/testdata/compile/duplicates.yaml", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, `Cluster "twice": name: duplicate name`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestBootstrapCommand(t *testing.T) {
	code, out, _ := run("bootstrap", "--node-id", "edge-1", "--node-cluster", "edge", "--xds-address", "127.0.0.1:18000")
	if code != 0 || !strings.Contains(out, "id: edge-1") || !strings.Contains(out, "api_type: GRPC") {
		t.Fatalf("envoy bootstrap: exit %d\n%s", code, out)
	}
	code, out, _ = run("bootstrap", "--node-id", "edge-1", "--delta")
	if code != 0 || !strings.Contains(out, "api_type: DELTA_GRPC") {
		t.Fatalf("delta bootstrap: exit %d\n%s", code, out)
	}
	code, out, _ = run("bootstrap", "--grpc", "--node-id", "app-1")
	var b map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b["xds_servers"] == nil {
		t.Fatalf("grpc bootstrap: exit %d\n%s", code, out)
	}
	if code, _, stderr := run("bootstrap"); code != 1 || !strings.Contains(stderr, "node-id") {
		t.Fatalf("missing --node-id: exit %d, %q", code, stderr)
	}
}

// Groups match on locality and metadata, so the bootstrap must carry both,
// in both forms; a bad value is an error, not a bootstrap without it.
func TestBootstrapLocalityAndMetadata(t *testing.T) {
	code, out, stderr := run("bootstrap", "--grpc", "--node-id", "app-1", "--locality", "eu-west1/eu-west1-b", "--metadata", "team=pay=ments", "--metadata", "mesh=true")
	var b struct {
		Node struct {
			Locality map[string]string `json:"locality"`
			Metadata map[string]string `json:"metadata"`
		} `json:"node"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil {
		t.Fatalf("grpc bootstrap: exit %d %s\n%s", code, stderr, out)
	}
	if b.Node.Locality["region"] != "eu-west1" || b.Node.Locality["zone"] != "eu-west1-b" || b.Node.Metadata["team"] != "pay=ments" || b.Node.Metadata["mesh"] != "true" {
		t.Fatalf("node locality %v, metadata %v", b.Node.Locality, b.Node.Metadata)
	}
	code, out, stderr = run("bootstrap", "--node-id", "edge-1", "--locality", "eu-west1", "--metadata", "team=edge")
	if code != 0 || !strings.Contains(out, "region: eu-west1") || !strings.Contains(out, "team: edge") {
		t.Fatalf("envoy bootstrap: exit %d %s\n%s", code, stderr, out)
	}
	if code, out, stderr := run("bootstrap", "--grpc", "--node-id", "a", "--locality", "a/b/c/d"); code != 1 || out != "" || !strings.Contains(stderr, "--locality") {
		t.Fatalf("bad --locality: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr := run("bootstrap", "--grpc", "--node-id", "a", "--metadata", "novalue"); code != 1 || !strings.Contains(stderr, "--metadata") {
		t.Fatalf("bad --metadata: exit %d, %q", code, stderr)
	}
}

func TestBootstrapTLSFlags(t *testing.T) {
	code, out, stderr := run("bootstrap", "--grpc", "--tls", "--ca-file", "/p/ca.crt", "--cert-file", "/p/app.crt", "--key-file", "/p/app.key", "--node-id", "app-1")
	if code != 0 || !strings.Contains(out, `"type": "tls"`) || !strings.Contains(out, `"private_key_file": "/p/app.key"`) {
		t.Fatalf("grpc tls bootstrap: exit %d %s\n%s", code, stderr, out)
	}
	code, out, stderr = run("bootstrap", "--tls", "--ca-file", "/p/ca.crt", "--server-name", "pylon.example", "--node-id", "edge-1")
	if code != 0 || !strings.Contains(out, "UpstreamTlsContext") || !strings.Contains(out, "sni: pylon.example") {
		t.Fatalf("envoy tls bootstrap: exit %d %s\n%s", code, stderr, out)
	}
	// TLS files without --tls must not print a plaintext bootstrap.
	if code, out, stderr := run("bootstrap", "--grpc", "--ca-file", "/p/ca.crt", "--node-id", "app-1"); code != 1 || out != "" || !strings.Contains(stderr, "--ca-file needs --tls") {
		t.Fatalf("--ca-file without --tls: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr := run("bootstrap", "--tls", "--node-id", "app-1"); code != 1 || !strings.Contains(stderr, "--ca-file") {
		t.Fatalf("--tls without a CA: exit %d, %q", code, stderr)
	}
}

// --server and --cert-dir belong to the gRPC bootstrap: with Envoy's they
// would be dropped silently.
func TestBootstrapServerFlagsNeedGRPC(t *testing.T) {
	code, out, stderr := run("bootstrap", "--grpc", "--server", "--cert-dir", "/p/certs", "--node-id", "greeter-1")
	if code != 0 || !strings.Contains(out, `"server_listener_resource_name_template"`) || !strings.Contains(out, `"certificate_file": "/p/certs/tls.crt"`) {
		t.Fatalf("grpc server bootstrap: exit %d %s\n%s", code, stderr, out)
	}
	for _, flag := range [][]string{{"--server"}, {"--cert-dir", "/p/certs"}} {
		args := append([]string{"bootstrap", "--node-id", "edge-1"}, flag...)
		if code, out, stderr := run(args...); code != 1 || out != "" || !strings.Contains(stderr, flag[0]+" needs --grpc") {
			t.Fatalf("%s without --grpc: exit %d, %q %q", flag[0], code, out, stderr)
		}
	}
}

func TestValidateCommand(t *testing.T) {
	code, out, _ := run("validate", "--config", "../../examples/quickstart.yaml")
	if code != 0 || !strings.HasPrefix(out, "ok: version ") || !strings.Contains(out, "group default: 8 resources") {
		t.Fatalf("exit %d, %q", code, out)
	}
	code, _, stderr := run("validate", "--config", "../compile/testdata/compile/unknown_field.yaml")
	if code != 1 || !strings.Contains(stderr, `unknown_field.yaml:5: Cluster "typo": conect_timeout: unknown field`) {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}

// Security flags that contradict each other stop serve before it binds.
func TestServeSecurityFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-identity", "spiffe://example.org/ns/{cluster}/sa/{id}"}, "--node-identity needs --xds-client-ca"},
		{[]string{"--xds-require-client-cert"}, "--xds-require-client-cert needs --xds-client-ca"},
		{[]string{"--xds-tls-cert", "/nonexistent/pylon.crt", "--xds-tls-key", "/nonexistent/pylon.key"}, "/nonexistent/pylon.crt"},
		{[]string{"--secret-dir", "/nonexistent/secrets"}, "--secret-dir"},
	} {
		args := append([]string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, c.args...)
		if code, _, stderr := run(args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, %q; want an error mentioning %q", c.args, code, stderr, c.want)
		}
	}
}

func TestLogFlags(t *testing.T) {
	if code, _, stderr := run("serve", "--log-level", "loud"); code != 1 || !strings.Contains(stderr, "--log-level") {
		t.Fatalf("bad log level: exit %d, %q", code, stderr)
	}
}
