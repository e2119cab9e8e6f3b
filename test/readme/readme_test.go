// Package readme runs the commands of README.md and of every file under
// docs/ against a built pylon binary, so that every step they show works
// as shown.
package readme

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// repo is the repository's root, from this package's folder.
const repo = "../.."

// bound is how long one command, or a server's start or stop, may take.
const bound = 30 * time.Second

// skipped are the README's commands this test cannot run, each with why.
// Every entry must still be in the README: the list cannot outlive them.
var skipped = map[string]string{
	"go test -race -count=1 ./...":                               "the test suite itself, of which this test is part",
	"envoy -c envoy.yaml":                                        "needs an Envoy binary",
	"curl http://127.0.0.1:10000/":                               "talks to the Envoy started above",
	"GRPC_XDS_BOOTSTRAP=$PWD/xds-bootstrap.json ./your-grpc-app": "the reader's own application",
}

// exitCodes are the README commands expected to fail, with their exit
// code; every other command must exit 0.
var exitCodes = map[string]int{}

// TestREADMECommands builds pylon, starts `pylon serve` as the README does
// (on free loopback ports, in a folder holding a copy of the examples) and
// runs every command of the README's sh blocks in order against it.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := shCommands(string(readme))
	checkAllowLists(t, cmds)

	bin := filepath.Join(t.TempDir(), "pylon")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pylon")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	copyDir(t, filepath.Join(repo, "examples"), filepath.Join(work, "examples"))

	r := &runner{t: t, bin: bin, dir: work}
	for _, line := range cmds {
		if why, ok := skipped[line]; ok {
			t.Logf("skipped: %s (%s)", line, why)
			continue
		}
		r.run(line)
	}
	if r.main == nil {
		t.Fatal("the README never starts `pylon serve`")
	}
}

// shCommands returns the commands of the README's ```sh blocks, without
// comments, in order.
func shCommands(md string) []string {
	var cmds []string
	in := false
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
		case in && strings.TrimSpace(line) == "```":
			in = false
		case in:
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				cmds = append(cmds, line)
			}
		}
	}
	return cmds
}

// checkAllowLists fails when an allow-listed command left the README.
func checkAllowLists(t *testing.T, cmds []string) {
	t.Helper()
	have := map[string]bool{}
	for _, c := range cmds {
		have[c] = true
	}
	for c := range skipped {
		if !have[c] {
			t.Errorf("skipped command %q is no longer in the README: drop it from the list", c)
		}
	}
	for c := range exitCodes {
		if !have[c] {
			t.Errorf("command %q with an expected exit code is no longer in the README: drop it from the list", c)
		}
	}
}

// runner runs README commands in dir against the server it started.
type runner struct {
	t         *testing.T
	bin, dir  string
	main      *server // the README's `pylon serve`, serving the rest
	adminAddr string
}

// run runs one README line: `go run ./cmd/pylon ARGS` or `pylon ARGS`,
// perhaps with `> FILE`.
func (r *runner) run(line string) {
	t := r.t
	t.Helper()
	if strings.ContainsAny(line, `'"|&;<$`+"`") {
		t.Fatalf("README command %q: quoting, pipes and variables are not parsed here; extend the test or add it to skipped with a reason", line)
	}
	args := strings.Fields(line)
	switch {
	case len(args) > 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/pylon":
		args = args[3:]
	case len(args) > 1 && args[0] == "pylon":
		args = args[1:]
	default:
		t.Fatalf("README command %q: not a pylon command; run it here or add it to skipped with a reason", line)
	}
	var stdoutFile string
	if n := len(args); n >= 2 && args[n-2] == ">" {
		stdoutFile, args = args[n-1], args[:n-2]
	}
	if args[0] == "serve" {
		r.serve(line, args)
		return
	}
	if r.main == nil {
		t.Fatalf("README command %q comes before `pylon serve`", line)
	}
	stdout, stderr, code := r.exec(append(args, "--admin-addr", r.adminAddr))
	if want := exitCodes[line]; code != want {
		t.Fatalf("README command %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", line, code, want, stdout, stderr)
	}
	if stdoutFile != "" {
		if len(stdout) == 0 {
			t.Fatalf("README command %q wrote nothing to %s", line, stdoutFile)
		}
		if err := os.WriteFile(filepath.Join(r.dir, stdoutFile), stdout, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("ok: %s", line)
}

// exec runs the binary with args in dir, within bound.
func (r *runner) exec(args []string) (stdout, stderr []byte, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir = r.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		r.t.Fatalf("pylon %s: no exit within %v", strings.Join(args, " "), bound)
	}
	if err != nil && cmd.ProcessState == nil {
		r.t.Fatalf("pylon %s: %v", strings.Join(args, " "), err)
	}
	return out.Bytes(), errb.Bytes(), cmd.ProcessState.ExitCode()
}

// serve starts a README `pylon serve` on free loopback ports. The first
// one serves the commands after it, with a raw xDS client standing in for
// the README's Envoy (node demo); a later one (file mode) must start and
// stop cleanly.
func (r *runner) serve(line string, args []string) {
	t := r.t
	t.Helper()
	s := startServer(t, r.bin, r.dir, args)
	if r.main != nil {
		s.stop(t)
		t.Logf("ok (started, served, stopped with exit 0): %s", line)
		return
	}
	r.main, r.adminAddr = s, s.adminAddr
	t.Cleanup(func() { s.stop(t) })
	// The README's Envoy, bootstrapped with --node-id demo --node-cluster
	// demo: `pylon status demo` shows it.
	st := xdstest.OpenADS(t, xdstest.Dial(t, s.xdsAddr), xdstest.Node("demo"))
	st.Request(xdstype.ClusterURL)
	st.ACK(st.RecvType(xdstype.ClusterURL))
	t.Logf("ok (serving xDS on %s, admin on %s): %s", s.xdsAddr, s.adminAddr, line)
}

// server is a running `pylon serve`.
type server struct {
	cmd                *exec.Cmd
	log                *serveLog
	xdsAddr, adminAddr string
	restAddr           string // the REST-JSON port's, "" when off
	done               chan error
	once               sync.Once
}

// startServer starts bin with args and the flags that put it on free
// loopback ports; env, if given, is its environment.
func startServer(t *testing.T, bin, dir string, args []string, env ...string) *server {
	t.Helper()
	args = append(args, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json")
	s := &server{log: &serveLog{ready: make(chan [3]string, 1)}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir, s.cmd.Env = dir, env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	select {
	case addrs := <-s.log.ready:
		s.xdsAddr, s.adminAddr, s.restAddr = addrs[0], addrs[1], addrs[2]
		return s
	case err := <-s.done:
		t.Fatalf("pylon %s exited at start: %v\n%s", strings.Join(args, " "), err, s.log)
	case <-time.After(bound):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("pylon %s did not start within %v\n%s", strings.Join(args, " "), bound, s.log)
	}
	return nil
}

// stop ends the server as an operator does (SIGTERM); it must exit 0.
func (s *server) stop(t *testing.T) {
	s.once.Do(func() {
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("pylon serve stopped with %v\n%s", err, s.log)
			}
		case <-time.After(bound):
			_ = s.cmd.Process.Kill()
			<-s.done
			t.Errorf("pylon serve did not stop within %v", bound)
		}
	})
}

// serveLog keeps a server's output and reports the addresses of its
// "pylon serving" line, and of the REST-JSON port's line before it.
type serveLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	ready   chan [3]string // xDS, admin, REST ("" when off)
	rest    string
	seen    bool
}

// maxLog bounds what is kept of a server's output.
const maxLog = 1 << 20

func (l *serveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() < maxLog {
		l.buf.Write(p)
	}
	if l.seen {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	sc := bufio.NewScanner(bytes.NewReader(l.partial))
	for sc.Scan() {
		var rec struct {
			Msg, XDS, Admin string
			REST            string `json:"xds_rest"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec.Msg == "REST-JSON xDS serving" {
			l.rest = rec.REST
		}
		if rec.Msg == "pylon serving" {
			l.seen = true
			l.partial = nil
			l.ready <- [3]string{rec.XDS, rec.Admin, l.rest}
			return len(p), nil
		}
	}
	if i := bytes.LastIndexByte(l.partial, '\n'); i >= 0 {
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > maxLog {
		l.partial = nil
	}
	return len(p), nil
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Only ```sh blocks count, comments are dropped, and other blocks (a YAML
// example, a bare ``` block) are not commands.
func TestShCommands(t *testing.T) {
	md := "text\n```sh\ngo run ./cmd/pylon serve   # the server\n\n# a comment line\npylon status\n```\n" +
		"```yaml\nservices: []\n```\n```\nnot a command\n```\n  ```sh\n  pylon history\n  ```\n"
	got := shCommands(md)
	want := []string{"go run ./cmd/pylon serve", "pylon status", "pylon history"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("shCommands = %q, want %q", got, want)
	}
}
