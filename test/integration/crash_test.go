package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// child is a Pylon in its own process, so that it can be SIGKILLed.
type child struct {
	cmd    *exec.Cmd
	p      *pylon
	done   chan error
	killed sync.Once
}

func startChild(t *testing.T, dataDir string) *child {
	t.Helper()
	args, _ := json.Marshal([]string{"serve", "--data-dir", dataDir, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--log-format", "json", "--debounce", "5ms"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(args))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	addrs := make(chan pylon, 1)
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			var rec map[string]any
			if json.Unmarshal(lines.Bytes(), &rec) == nil && rec["msg"] == "pylon serving" {
				x, _ := rec["xds"].(string)
				a, _ := rec["admin"].(string)
				addrs <- pylon{xdsAddr: x, adminAddr: a}
			}
		}
		c.done <- cmd.Wait()
	}()
	select {
	case p := <-addrs:
		p.token = readToken(t, dataDir)
		c.p = &p
	case err := <-c.done:
		t.Fatalf("the child Pylon exited: %v", err)
	case <-time.After(bound):
		cmd.Process.Kill()
		t.Fatal("the child Pylon did not start")
	}
	t.Cleanup(func() { c.kill() })
	return c
}

// kill sends SIGKILL (no shutdown, no flush) and waits for the exit.
func (c *child) kill() {
	c.killed.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
}

// A child Pylon takes a stream of API writes and is killed with SIGKILL at
// random moments; after each restart, every acknowledged write is there and
// the store opens cleanly.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 0))
	c := startChild(t, dir)
	if code, res := c.p.api(t, "POST", "/v1/apply", "services:\n- { name: svc, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		t.Fatalf("apply: %d %v", code, res)
	}
	acked := map[string]bool{}
	n := 0
	for round := range 3 {
		killAt := time.Duration(100+rng.IntN(500)) * time.Millisecond
		proc := c.cmd.Process
		killer := time.AfterFunc(killAt, func() { _ = proc.Kill() })
		for i := 0; i < 2000; i++ {
			n++
			addr := fmt.Sprintf("10.%d.%d.%d", round, n/250, n%250)
			req, _ := json.Marshal(map[string]any{"address": addr, "port": 80})
			code, ok := postOnce(c.p, "/v1/services/svc/endpoints", string(req))
			if !ok {
				break // the process is gone
			}
			if code != http.StatusOK {
				t.Fatalf("register %s: %d", addr, code)
			}
			acked[addr+":80"] = true
		}
		killer.Stop()
		c.kill()

		c = startChild(t, dir) // the store must open cleanly
		code, body := c.p.api(t, "GET", "/v1/objects", nil)
		if code != http.StatusOK {
			t.Fatalf("after restart: %d", code)
		}
		have := map[string]bool{}
		for _, o := range body["objects"].([]any) {
			m := o.(map[string]any)
			if m["kind"] == "endpoints.svc" {
				have[m["name"].(string)] = true
			}
		}
		for a := range acked {
			if !have[a] {
				t.Fatalf("round %d: the acknowledged registration of %s was lost (%d acknowledged, %d present)", round, a, len(acked), len(have))
			}
		}
		t.Logf("round %d: killed after %v, %d acknowledged writes all present", round, killAt, len(acked))
	}
}

// postOnce sends one authorised write; ok is false when the server is gone.
func postOnce(p *pylon, path, body string) (code int, ok bool) {
	req, _ := http.NewRequest("POST", "http://"+p.adminAddr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	return resp.StatusCode, true
}
