package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// adminStatus is the status code of GET /status with tok.
func (s *serve) adminStatus(t *testing.T, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.adminAddr+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /status: %v\n%s", err, s.out)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Finding 8 (issue 30): SIGHUP, the usual way to ask a daemon to re-read
// its files, re-reads the token files (a rewrite that kept the file's
// size and time, which only a re-read sees, too) and serve carries on.
func TestSIGHUPReloadsAndDoesNotExit(t *testing.T) {
	s := startServe(t)
	path := filepath.Join(s.dataDir, "read-token")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(b))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	rotated := strings.Repeat("b", len(old))
	if err := os.WriteFile(path, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	s.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "files re-read on a signal") {
		if s.exited(20 * time.Millisecond) {
			t.Fatalf("SIGHUP ended serve (%v):\n%s", s.cmd.ProcessState, s.out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line says SIGHUP re-read the files:\n%s", s.out)
		}
	}
	if code := s.adminStatus(t, rotated); code != http.StatusOK {
		t.Errorf("the re-read read token: %d, want 200", code)
	}
	if code := s.adminStatus(t, old); code != http.StatusUnauthorized {
		t.Errorf("the old read token after SIGHUP: %d, want 401", code)
	}
	s.signal(t, syscall.SIGTERM)
	if !s.exited(30*time.Second) || s.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("serve did not stop cleanly on SIGTERM after SIGHUP:\n%s", s.out)
	}
}
