package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// renderStep is a marked fenced block of docs/render.md.
type renderStep struct {
	marker []string
	body   string
	line   int
}

var renderMarker = regexp.MustCompile(`^<!-- test: (.*) -->$`)

func renderDocSteps(t *testing.T, path string) []renderStep {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []renderStep
	for i := 0; i < len(lines); i++ {
		m := renderMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("render.md:%d: a test marker not followed by a fenced block", i+1)
		}
		end := i + 2
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("render.md:%d: unterminated block", i+2)
		}
		out = append(out, renderStep{marker: strings.Fields(m[1]), body: strings.Join(lines[i+2:end], "\n") + "\n", line: i + 1})
		i = end
	}
	return out
}

// TestRenderDoc runs docs/render.md as written: config blocks are written
// to their file, commands run by the CLI in a temporary folder, their
// output (or, for a command that must fail, their error) compared with the
// block after them, and a file block compared with the rendered file.
func TestRenderDoc(t *testing.T) {
	doc, err := filepath.Abs("../../docs/render.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := renderDocSteps(t, doc)
	t.Chdir(t.TempDir())
	var lastOut, lastErr string
	ran := 0
	for _, s := range steps {
		switch s.marker[0] {
		case "config":
			if err := os.WriteFile(s.marker[1], []byte(s.body), 0o600); err != nil {
				t.Fatal(err)
			}
		case "run", "fails":
			args := strings.Fields(strings.TrimSpace(s.body))
			if len(args) == 0 || args[0] != "pylon" {
				t.Fatalf("render.md:%d: not a pylon command: %q", s.line, s.body)
			}
			code, out, errOut := run(args[1:]...)
			if want := map[string]int{"run": 0, "fails": 1}[s.marker[0]]; code != want {
				t.Fatalf("render.md:%d: %v: exit %d, want %d: %s", s.line, args, code, want, errOut)
			}
			lastOut, lastErr = out, errOut
			ran++
		case "output":
			if lastOut != s.body {
				t.Errorf("render.md:%d: the command printed\n%s\nthe doc shows\n%s", s.line, lastOut, s.body)
			}
		case "error":
			if !strings.Contains(lastErr, strings.TrimSpace(s.body)) {
				t.Errorf("render.md:%d: the command's error\n%s\ndoes not say\n%s", s.line, lastErr, s.body)
			}
		case "file":
			b, err := os.ReadFile(s.marker[1])
			if err != nil || string(b) != s.body {
				t.Errorf("render.md:%d: %s holds\n%s\nthe doc shows\n%s (%v)", s.line, s.marker[1], b, s.body, err)
			}
		case "skip":
		default:
			t.Fatalf("render.md:%d: unknown marker %v", s.line, s.marker)
		}
	}
	if ran < 4 {
		t.Fatalf("the doc's examples were not all found: %d commands", ran)
	}
}

const renderConfig = `
services:
- name: web
  endpoints: [{ address: 10.0.1.20, port: 8080 }]
routes:
- name: site
  virtual_hosts:
  - name: site
    domains: ["*"]
    routes:
    - to: [{ service: web }]
listeners:
- { name: http, port: 8080, routes: site }
`

// TestRenderRefusals: missing flags, and a config with a private key
// without --include-secrets (naming the Secret, quoting no key, writing
// nothing).
func TestRenderRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	ca := certstest.NewCA(t, "ca")
	ca.Issue(t, certstest.Server("edge")).Write(t, ca, dir, "edge")
	tls := strings.Replace(renderConfig, "routes: site }", "routes: site, tls: { secret: edge-cert } }", 1) +
		"secrets:\n- { name: edge-cert, cert_file: edge.crt, key_file: edge.key }\n"
	if err := os.WriteFile(cfg, []byte(tls), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "n", "--out", out}, "--config FILE|FOLDER is required"},
		{[]string{"--config", cfg, "--node-id", "n"}, "--out DIR is required"},
		{[]string{"--config", cfg, "--out", out}, "--node-id is required"},
		{[]string{"--config", cfg, "--node-id", "n", "--out", out, "--locality", "a/b/c/d"}, "--locality"},
		{[]string{"--config", cfg, "--node-id", "n", "--out", out, "--envoy-dir", "relative"}, "must be an absolute path"},
		{[]string{"--config", dir, "--node-id", "n", "--out", dir}, "is the config folder"},
		{[]string{"--config", cfg, "--node-id", "n", "--out", out}, `Secret "edge-cert" holds private key material`},
	} {
		code, _, stderr := run(append([]string{"render"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
		if strings.Contains(stderr, "PRIVATE KEY") {
			t.Errorf("%v: the error quotes the key", c.args)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused render created %s (%v)", out, err)
	}
	code, stdout, stderr := run("render", "--config", cfg, "--node-id", "n", "--out", out, "--include-secrets")
	if code != 0 || !strings.Contains(stdout, "sds-edge-cert.yaml") {
		t.Fatalf("with --include-secrets: exit %d: %s%s", code, stdout, stderr)
	}
}

// lockedBuffer is a buffer written by the command's goroutines and read by
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitRender polls cond until it holds, for at most 10s.
func waitRender(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replaceConfig writes path by rename, as deploy tools do.
func replaceConfig(t *testing.T, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRenderWatch: --watch renders at start, renders a config change
// (a new endpoint reaches its file), refuses a bad change with the error
// printed while the files stay, renders the next good change, and stops
// cleanly when its context ends.
func TestRenderWatch(t *testing.T) {
	dir := t.TempDir()
	cfg, out := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "out")
	replaceConfig(t, cfg, renderConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"render", "--config", cfg, "--node-id", "edge-1", "--out", out, "--watch", "--debounce", "10ms", "--log-level", "warn"}, &stdout, &stderr)
	}()
	eds := filepath.Join(out, "eds-web.yaml")
	read := func() string { b, _ := os.ReadFile(eds); return string(b) }
	waitRender(t, "the first render", func() bool { return strings.Contains(read(), "10.0.1.20") })

	replaceConfig(t, cfg, strings.Replace(renderConfig, "10.0.1.20", "10.0.9.9", 1))
	waitRender(t, "the change rendered", func() bool { return strings.Contains(read(), "10.0.9.9") })

	before := read()
	replaceConfig(t, cfg, strings.Replace(renderConfig, "service: web", "service: nope", 1))
	waitRender(t, "the refusal printed", func() bool { return strings.Contains(stderr.String(), "render refused, the previous files stay") })
	if !strings.Contains(stderr.String(), "nope") || read() != before {
		t.Fatalf("the refusal: %s; the file now holds\n%s", stderr.String(), read())
	}

	replaceConfig(t, cfg, strings.Replace(renderConfig, "10.0.1.20", "10.0.7.7", 1))
	waitRender(t, "the next good change rendered", func() bool { return strings.Contains(read(), "10.0.7.7") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("render --watch did not stop")
	}
	if es, _ := filepath.Glob(filepath.Join(out, ".pylon-render-*")); len(es) != 0 {
		t.Fatalf("temporary files left: %v", es)
	}
}

// TestRenderWatchFollowsCertificateRotation: with --watch, a rotated
// certificate (the config unchanged) reaches its Secret's file: render
// watches the files the config names, as serve does.
func TestRenderWatchFollowsCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	cfg, out := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "out")
	ca := certstest.NewCA(t, "ca")
	ca.Issue(t, certstest.Server("edge")).Write(t, ca, dir, "edge")
	replaceConfig(t, cfg, strings.Replace(renderConfig, "routes: site }", "routes: site, tls: { secret: edge-cert } }", 1)+
		"secrets:\n- { name: edge-cert, cert_file: edge.crt, key_file: edge.key }\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"render", "--config", cfg, "--node-id", "edge-1", "--out", out, "--include-secrets", "--watch", "--debounce", "10ms", "--log-level", "warn"}, &stdout, &stderr)
	}()
	sds := filepath.Join(out, "sds-edge-cert.yaml")
	read := func() string { b, _ := os.ReadFile(sds); return string(b) }
	waitRender(t, "the first render", func() bool { return read() != "" })
	first := read()

	ca.Issue(t, certstest.Server("edge")).Write(t, ca, dir, "edge")
	waitRender(t, "the rotated certificate rendered", func() bool { return read() != first })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("render --watch did not stop")
	}
	if strings.Contains(stdout.String()+stderr.String(), "PRIVATE KEY") {
		t.Fatal("key material printed")
	}
}
