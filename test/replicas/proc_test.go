package replicas_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bound is how long one replica may take to start or stop, and the bound of
// every wait in these tests that has no tighter one.
const bound = 30 * time.Second

// Replicas publish their proxies' summary every fleetPeriod on a lease of
// fleetTTL (etcd leases count whole seconds): a SIGKILLed replica's proxies
// leave the fleet-wide list about fleetTTL after its death.
const (
	fleetPeriod = 200 * time.Millisecond
	fleetTTL    = time.Second
)

// fleet is a set of replicas serving one fleet: one etcd key prefix, the
// same etcd endpoints, and the same token files (the docs tell operators
// to share them, so that one token works on every replica).
type fleet struct {
	t                        *testing.T
	endpoints                []string
	prefix                   string
	tokenFile, readTokenFile string
	token, readToken         string
	http                     *http.Client
}

// newFleet prepares a fleet on etcd's endpoints under a prefix of its own
// (several tests share one etcd), with shared token files.
func newFleet(t *testing.T, endpoints []string) *fleet {
	t.Helper()
	dir := t.TempDir()
	f := &fleet{
		t: t, endpoints: endpoints, prefix: "/t-" + keyName(t.Name()),
		tokenFile: filepath.Join(dir, "admin-token"), readTokenFile: filepath.Join(dir, "read-token"),
		token: newToken(t), readToken: newToken(t),
	}
	for path, tok := range map[string]string{f.tokenFile: f.token, f.readTokenFile: f.readToken} {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A write may wait for etcd's per-call timeout (5s) more than once
	// while an election is under way: the client waits longer.
	tr := &http.Transport{}
	f.http = &http.Client{Transport: tr, Timeout: 25 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return f
}

var notKeyChar = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// keyName is s made fit for an etcd prefix and a node id.
func keyName(s string) string { return notKeyChar.ReplaceAllString(s, "-") }

func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// replica is one `pylon serve` child process.
type replica struct {
	f                  *fleet
	id                 string
	cmd                *exec.Cmd
	log                *procLog
	xdsAddr, adminAddr string
	done               chan struct{} // closed once the process is reaped
	exit               *os.ProcessState
}

// start runs `pylon serve` on the fleet's etcd as replica id, with extra
// flags, and waits for its "pylon serving" line. It is killed and reaped
// when the test ends, its log printed if the test failed.
func (f *fleet) start(id string, extra ...string) *replica {
	t := f.t
	t.Helper()
	dir := t.TempDir()
	args := append([]string{
		"serve", "--store", "etcd", "--etcd-endpoints", strings.Join(f.endpoints, ","), "--etcd-prefix", f.prefix,
		"--id", id, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--data-dir", filepath.Join(dir, "data"), "--admin-token-file", f.tokenFile, "--read-token-file", f.readTokenFile,
		"--fleet-status-period", fleetPeriod.String(), "--fleet-status-ttl", fleetTTL.String(),
		"--debounce", "20ms", "--debounce-max", "200ms",
	}, extra...)
	r := &replica{f: f, id: id, log: newProcLog(), done: make(chan struct{})}
	r.cmd = exec.Command(pylonBin, args...)
	r.cmd.Dir = dir
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		r.exit = r.cmd.ProcessState
		close(r.done)
	}()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("--- log of %s (%s) ---\n%s", id, r.exitText(), r.log.tail(64<<10))
		}
	})
	select {
	case addrs := <-r.log.ready:
		r.xdsAddr, r.adminAddr = addrs[0], addrs[1]
		return r
	case <-r.done:
		t.Fatalf("%s exited at start (%s)", id, r.exitText())
	case <-time.After(bound):
		t.Fatalf("%s did not start within %v", id, bound)
	}
	return nil
}

// kill ends the replica with SIGKILL (no-op once it has exited) and reaps
// it.
func (r *replica) kill() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// signal sends sig to the replica.
func (r *replica) signal(sig os.Signal) {
	r.f.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.f.t.Fatalf("signal %v to %s: %v", sig, r.id, err)
	}
}

// exited reports whether the replica's process has ended.
func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the process to end and returns its exit
// code, or fails the test.
func (r *replica) waitExit(d time.Duration) int {
	r.f.t.Helper()
	select {
	case <-r.done:
		return r.exit.ExitCode()
	case <-time.After(d):
		r.f.t.Fatalf("%s still running %v after it was told to stop", r.id, d)
		return -1
	}
}

func (r *replica) exitText() string {
	select {
	case <-r.done:
		if ws, ok := r.exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", r.exit.ExitCode())
	default:
		return "running"
	}
}

// do sends an admin API request with the write token (write) or the read
// token. A transport error (the replica is dead, the request timed out) is
// returned, not fatal: a writer racing a kill expects them.
func (r *replica) do(method, path, body string, write bool) (int, []byte, error) {
	return r.doCtx(context.Background(), method, path, body, write)
}

// doCtx is do within ctx.
func (r *replica) doCtx(ctx context.Context, method, path, body string, write bool) (int, []byte, error) {
	tok := r.f.readToken
	if write {
		tok = r.f.token
	}
	ctx, cancel := context.WithTimeout(ctx, r.f.http.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.adminAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := r.f.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// getJSON reads path with the read token into v; anything but 200 fails
// the test.
func (r *replica) getJSON(path string, v any) {
	t := r.f.t
	t.Helper()
	code, b, err := r.do("GET", path, "", false)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s on %s: %d %v: %s", path, r.id, code, err, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s on %s: %v: %s", path, r.id, err, b)
	}
}

// writeResult is what a successful write answers.
type writeResult struct {
	Revision int64  `json:"revision"`
	Version  string `json:"version"`
	Error    string `json:"error"`
}

// apply applies doc through r and requires a 200.
func (r *replica) apply(doc string) writeResult {
	t := r.f.t
	t.Helper()
	code, b, err := r.do("POST", "/v1/apply", doc, true)
	if err != nil || code != http.StatusOK {
		t.Fatalf("apply through %s: %d %v: %s", r.id, code, err, b)
	}
	var res writeResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// statusBody is the part of /status these tests read.
type statusBody struct {
	Identifier string `json:"identifier"`
	Degraded   bool   `json:"degraded"`
	Reason     string `json:"reason"`
	Partial    string `json:"partial"`
	Config     struct {
		Version string `json:"version"`
	} `json:"config"`
}

func (r *replica) status() statusBody {
	r.f.t.Helper()
	var st statusBody
	r.getJSON("/status", &st)
	return st
}

// readyz is the open readiness probe: its code and status word.
func (r *replica) readyz() (int, string) {
	r.f.t.Helper()
	code, b, err := r.do("GET", "/readyz", "", false)
	if err != nil {
		r.f.t.Fatalf("GET /readyz on %s: %v", r.id, err)
	}
	var body struct{ Status string }
	_ = json.Unmarshal(b, &body)
	return code, body.Status
}

// cli runs the pylon binary against r's admin API with the shared read
// token and returns its output and exit code.
func (r *replica) cli(args ...string) (string, int) {
	t := r.f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	args = append(args, "--admin-addr", r.adminAddr, "--read-token-file", r.f.readTokenFile)
	cmd := exec.CommandContext(ctx, pylonBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("pylon %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// waitAll polls cond on every replica every 20ms until it holds on all,
// within bound. What is awaited happens in other processes (a watch
// event, a lease expiring in etcd): polling what they show is the only
// observation there is.
func waitAll(t *testing.T, rs []*replica, what string, cond func(*replica) bool) {
	t.Helper()
	waitUntil(t, what, func() bool {
		for _, r := range rs {
			if !cond(r) {
				return false
			}
		}
		return true
	})
}

// waitUntil polls cond every 20ms until it holds, within bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitShow(t, what, cond, func() string { return "" })
}

// waitShow is waitUntil that shows what show returns when it fails.
func waitShow(t *testing.T, what string, cond func() bool, show func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s\n%s", bound, what, show())
		}
		<-tick.C
	}
}

// sameVersion waits until every replica publishes version.
func sameVersion(t *testing.T, rs []*replica, version string) {
	t.Helper()
	waitAll(t, rs, "config version "+version+" published on every replica", func(r *replica) bool {
		return r.status().Config.Version == version
	})
}

// agree waits until every replica publishes one config version and
// returns it: for the end of a run whose last write's version no client
// was told (a write abandoned in flight may still land, a registration
// answers its revision only).
func agree(t *testing.T, rs []*replica) string {
	t.Helper()
	var versions []string
	waitShow(t, "every replica at one config version", func() bool {
		versions = versions[:0]
		for _, r := range rs {
			versions = append(versions, r.status().Config.Version)
		}
		return versions[0] != "" && slices.Equal(versions[1:], slices.Repeat(versions[:1], len(rs)-1))
	}, func() string { return "versions: " + strings.Join(versions, " ") })
	return versions[0]
}

// procLog keeps a child's output (bounded) and reports the addresses of
// its "pylon serving" line.
type procLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	ready   chan [2]string
	seen    bool
}

// maxLog bounds what is kept of a child's output.
const maxLog = 4 << 20

func newProcLog() *procLog { return &procLog{ready: make(chan [2]string, 1)} }

func (l *procLog) Write(p []byte) (int, error) {
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
	sc.Buffer(nil, maxLog)
	for sc.Scan() {
		var rec struct{ Msg, XDS, Admin string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "pylon serving" {
			l.seen, l.partial = true, nil
			l.ready <- [2]string{rec.XDS, rec.Admin}
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

// tail is the last n bytes of the output.
func (l *procLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
