package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serve is `pylon serve` (file mode, the quickstart) run by main in a
// child process, with its output.
type serve struct {
	cmd                *exec.Cmd
	out                *output
	done               chan struct{}
	xdsAddr, adminAddr string
	// dataDir holds the token files.
	dataDir string
}

// output keeps a child's output and reports its "pylon serving" line.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan [2]string
	seen  bool
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.buf.Len() < 1<<20 {
		o.buf.Write(p)
	}
	if !o.seen {
		sc := bufio.NewScanner(bytes.NewReader(o.buf.Bytes()))
		for sc.Scan() {
			var rec struct{ Msg, XDS, Admin string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "pylon serving" {
				o.seen = true
				o.ready <- [2]string{rec.XDS, rec.Admin}
				break
			}
		}
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// startServe starts the child with args after serve's own, and waits for
// it to serve.
func startServe(t *testing.T, args ...string) *serve {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(cfg, examples.Quickstart(), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data"),
		"--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	s := &serve{out: &output{ready: make(chan [2]string, 1)}, done: make(chan struct{}), dataDir: filepath.Join(dir, "data")}
	s.cmd = exec.Command(os.Args[0], args...)
	s.cmd.Env = append(os.Environ(), childEnv+"=1")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	select {
	case a := <-s.out.ready:
		s.xdsAddr, s.adminAddr = a[0], a[1]
	case <-s.done:
		t.Fatalf("serve exited at start:\n%s", s.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start within 30s:\n%s", s.out)
	}
	return s
}

// signal sends sig to the child.
func (s *serve) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// exited reports whether the child exited within d.
func (s *serve) exited(d time.Duration) bool { return closedWithin(s.done, d) }

// A first SIGTERM with no proxy connected stops serve at once, exit 0,
// although file mode drains by default (30s): there is nothing to drain.
func TestServeSIGTERMNothingToDrain(t *testing.T) {
	s := startServe(t)
	s.signal(t, syscall.SIGTERM)
	if !s.exited(10 * time.Second) {
		t.Fatalf("serve did not stop within 10s of SIGTERM with no proxy:\n%s", s.out)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, s.out)
	}
}

// A second SIGTERM during a long drain stops serve at once, exit 0, and
// says so. "At once" is against the two-minute drain: within an eighth of
// it, room for a loaded 2-core machine.
func TestServeSecondSIGTERMStopsNow(t *testing.T) {
	const drain = 2 * time.Minute
	s := startServe(t, "--drain-period", drain.String())
	for _, node := range []string{"a", "b", "c"} {
		st := xdstest.OpenADS(t, xdstest.Dial(t, s.xdsAddr), xdstest.Node(node))
		st.Request(xdstype.ClusterURL)
		st.ACK(st.RecvType(xdstype.ClusterURL))
	}
	s.signal(t, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.out.String(), "draining: not ready") {
		if time.Now().After(deadline) || s.exited(10*time.Millisecond) {
			t.Fatalf("no drain under way after SIGTERM:\n%s", s.out)
		}
	}
	if resp, err := http.Get("http://" + s.adminAddr + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz during the drain: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	stopNow := time.Now()
	s.signal(t, syscall.SIGTERM)
	if !s.exited(drain / 4) {
		t.Fatalf("serve did not stop within %v of the second SIGTERM:\n%s", drain/4, s.out)
	}
	if took := time.Since(stopNow); took > drain/8 {
		t.Errorf("serve stopped %v after the second SIGTERM, want at once (not the %v drain)", took, drain)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d:\n%s", code, s.out)
	}
	if !strings.Contains(s.out.String(), "drain cut short: stopping now") {
		t.Errorf("the log does not say the drain was cut short:\n%s", s.out)
	}
}
