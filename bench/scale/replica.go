package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Bounds of the replicas' life and of every admin request.
const (
	startBound   = 60 * time.Second
	requestBound = 30 * time.Second
	buildBound   = 10 * time.Minute
	maxLog       = 4 << 20
)

// env is one run's etcd, pylon binary, shared tokens and replicas.
type env struct {
	dir                      string
	etcd                     *embed.Etcd
	endpoint                 string
	bin                      string
	tokenFile, readTokenFile string
	token, readToken         string
	http                     *http.Client
	mu                       sync.Mutex // guards replicas
	replicas                 []*replica
	// flags every replica gets after the common ones.
	flags []string
}

// newEnv starts etcd in a temp folder and, unless bin names one, builds
// ./cmd/pylon there.
func newEnv(ctx context.Context, bin string, flags []string) (*env, error) {
	dir, err := os.MkdirTemp("", "pylon-scale-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, bin: bin, flags: flags, http: &http.Client{Timeout: requestBound}}
	e.tokenFile, e.readTokenFile = filepath.Join(dir, "admin-token"), filepath.Join(dir, "read-token")
	e.token, e.readToken = newToken(), newToken()
	for path, tok := range map[string]string{e.tokenFile: e.token, e.readTokenFile: e.readToken} {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			e.close()
			return nil, err
		}
	}
	if e.bin == "" {
		if e.bin, err = buildPylon(ctx, dir); err != nil {
			e.close()
			return nil, err
		}
	}
	if e.etcd, e.endpoint, err = startEtcd(filepath.Join(dir, "etcd")); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// close kills every replica, stops etcd and removes the folder.
func (e *env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.replicas {
		r.kill()
	}
	if e.etcd != nil {
		e.etcd.Close()
	}
	e.http.CloseIdleConnections()
	os.RemoveAll(e.dir)
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildPylon builds ./cmd/pylon of the module this is run in into dir.
func buildPylon(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, buildBound)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("finding the module's root (go env GOMOD): %v %q", err, mod)
	}
	bin := filepath.Join(dir, "pylon")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/pylon")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pylon: %v\n%s", err, out)
	}
	return bin, nil
}

// replica is one `pylon serve --store etcd` child process.
type replica struct {
	e                  *env
	id                 string
	cmd                *exec.Cmd
	log                *procLog
	xdsAddr, adminAddr string
	done               chan struct{}
}

// start runs a replica named id with extra flags and waits for its
// "pylon serving" line.
func (e *env) start(ctx context.Context, id string, extra ...string) (*replica, error) {
	dir := filepath.Join(e.dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	args := append([]string{
		"serve", "--store", "etcd", "--etcd-endpoints", e.endpoint, "--etcd-prefix", "/scale",
		"--id", id, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json",
		"--data-dir", filepath.Join(dir, "data"), "--admin-token-file", e.tokenFile, "--read-token-file", e.readTokenFile,
	}, e.flags...)
	args = append(args, extra...)
	r := &replica{e: e, id: id, log: newProcLog(), done: make(chan struct{})}
	r.cmd = exec.Command(e.bin, args...)
	r.cmd.Dir = dir
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.replicas = append(e.replicas, r)
	e.mu.Unlock()
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	select {
	case addrs := <-r.log.ready:
		r.xdsAddr, r.adminAddr = addrs[0], addrs[1]
		return r, nil
	case <-r.done:
		return nil, fmt.Errorf("%s exited at start: %s", id, r.log.tail(4<<10))
	case <-time.After(startBound):
		return nil, fmt.Errorf("%s did not start within %v", id, startBound)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startAll starts the replicas named by ids, each with its flags, at
// once, and returns them in order.
func (e *env) startAll(ctx context.Context, ids []string, flags [][]string) ([]*replica, error) {
	out := make([]*replica, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = e.start(ctx, id, flags[i]...)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// kill ends the replica with SIGKILL and reaps it.
func (r *replica) kill() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// do sends an admin request with the write token (write) or the read
// token, bounded by requestBound.
func (r *replica) do(ctx context.Context, method, path, body string, write bool) (int, []byte, error) {
	tok := r.e.readToken
	if write {
		tok = r.e.token
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.adminAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := r.e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, err
}

// written is what a write made: the config version of the replica that
// took it and the store revision. A shard publishes its own version (it
// builds its groups' share), the same revision.
type written struct {
	Version  string
	Revision int64
}

// apply writes doc through r.
func (r *replica) apply(ctx context.Context, doc string) (written, error) {
	code, b, err := r.do(ctx, "POST", "/v1/apply", doc, true)
	if err != nil || code != http.StatusOK {
		return written{}, fmt.Errorf("apply through %s: %d %v: %.2000s", r.id, code, err, b)
	}
	var res struct {
		written
		Error string
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Error != "" {
		return written{}, fmt.Errorf("apply through %s: %v %s", r.id, err, res.Error)
	}
	return res.written, nil
}

// published is the config version r publishes and the node groups it
// lists.
func (r *replica) published(ctx context.Context) (string, int) {
	code, b, err := r.do(ctx, "GET", "/status", "", false)
	if err != nil || code != http.StatusOK {
		return "", 0
	}
	var st struct {
		Config struct {
			Version string
			Groups  []struct{ Name string }
		}
	}
	_ = json.Unmarshal(b, &st)
	return st.Config.Version, len(st.Config.Groups)
}

// partial is what r's /status says of the fleet status it could not read.
func (r *replica) partial(ctx context.Context) string {
	_, b, err := r.do(ctx, "GET", "/status", "", false)
	if err != nil {
		return err.Error()
	}
	var st struct{ Partial string }
	_ = json.Unmarshal(b, &st)
	return st.Partial
}

// waitPublished waits, within bound, until every replica publishes w's
// version or, for a shard (which publishes its own: it builds its groups'
// share), lists at least groups node groups at a version that held for
// two polls: the store's revision is not in /status.
func waitPublished(ctx context.Context, rs []*replica, w written, groups int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for _, r := range rs {
		last := ""
		for {
			v, n := r.published(ctx)
			if v == w.Version || (groups > 0 && n >= groups && v == last) {
				break
			}
			last = v
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s does not publish version %s (or %d groups) within %v: it publishes %s, %d groups", r.id, w.Version, groups, bound, v, n)
			}
			time.Sleep(500 * time.Millisecond) // another process's state: polled
		}
	}
	return nil
}

// metrics reads r's /metrics and sums each metric's samples by name (and
// by name{labels} too), so that both pylon_xds_streams and
// pylon_balance_shed_total{kind="delta"} can be looked up.
func (r *replica) metrics(ctx context.Context) (map[string]float64, error) {
	code, b, err := r.do(ctx, "GET", "/metrics", "", false)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics on %s: %d %v", r.id, code, err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		key := line[:i]
		out[key] += v
		if j := strings.IndexByte(key, '{'); j >= 0 {
			out[key[:j]] += v
		}
	}
	return out, nil
}

// memory is r's live heap (what a forced collection left allocated) and
// its resident set, in bytes.
func (r *replica) memory(ctx context.Context) (heap, rss float64, err error) {
	// The heap profile's gc=1 runs a collection first: the heap then holds
	// what is live, not what the last cycle left.
	if code, _, err := r.do(ctx, "GET", "/debug/pprof/heap?gc=1", "", false); err != nil || code != http.StatusOK {
		return 0, 0, fmt.Errorf("forcing a GC on %s: %d %v", r.id, code, err)
	}
	m, err := r.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return m["go_memstats_heap_alloc_bytes"], procRSS(r.cmd.Process.Pid), nil
}

// procRSS is VmRSS of pid from /proc, in bytes (0 where unreadable).
func procRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// cpu is the CPU time r's process has used so far, in seconds (0 where
// unreadable): utime and stime of /proc/PID/stat, at the kernel's 100 Hz.
func (r *replica) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and
	// stime are the 14th and 15th of the whole line.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// cpuOf sums the replicas' CPU time.
func cpuOf(rs []*replica) float64 {
	t := 0.0
	for _, r := range rs {
		t += r.cpu()
	}
	return t
}

// cli runs the pylon binary against r's admin API with the read token.
func (r *replica) cli(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestBound)
	defer cancel()
	args = append(args, "--admin-addr", r.adminAddr, "--read-token-file", r.e.readTokenFile)
	out, err := exec.CommandContext(ctx, r.e.bin, args...).CombinedOutput()
	return string(out), err
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
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		var rec struct{ Msg, XDS, Admin string }
		if json.Unmarshal(l.partial[:i], &rec) == nil && rec.Msg == "pylon serving" {
			l.seen, l.partial = true, nil
			l.ready <- [2]string{rec.XDS, rec.Admin}
			return len(p), nil
		}
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
