package admin

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// POST /v1/sources/git/poll asks the Git source to poll at once: a write,
// so only the write token may; its body (a Git host's push event) is read
// up to a bound and ignored. Without a Git source it is not there.
func TestGitPollWebhook(t *testing.T) {
	var polls atomic.Int64
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, PollGit: func() { polls.Add(1) }}, nil)
	const path = "/v1/sources/git/poll"
	for _, tok := range []string{"", readTok, "wrong"} {
		if code, _ := h.do(t, "POST", path, tok, []byte(`{"ref":"refs/heads/main"}`)); code != http.StatusUnauthorized {
			t.Errorf("POST %s with token %q: %d, want 401", path, tok, code)
		}
	}
	if n := polls.Load(); n != 0 {
		t.Fatalf("%d polls from refused requests", n)
	}
	if code, body := h.do(t, "POST", path, writeTok, []byte(`{"ref":"refs/heads/main"}`)); code != http.StatusAccepted || !strings.Contains(body, "poll") {
		t.Fatalf("POST %s: %d %s, want 202", path, code, body)
	}
	if n := polls.Load(); n != 1 {
		t.Fatalf("%d polls after one webhook call, want 1", n)
	}
	big := bytes.Repeat([]byte("x"), maxWebhookBody+1)
	if code, body := h.do(t, "POST", path, writeTok, big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST %s with %d bytes: %d %s, want 413", path, len(big), code, body)
	}

	none := newHarness(t, Options{Token: writeTok}, nil)
	if code, body := none.do(t, "POST", path, writeTok, nil); code != http.StatusNotFound || !strings.Contains(body, "--config-git") {
		t.Fatalf("POST %s without a Git source: %d %s, want 404 naming --config-git", path, code, body)
	}
}

// With a Git source, /summary's mode is "git" and names the repository,
// so that the dashboard's read-only notice says where to push.
func TestSummaryNamesTheGitRepository(t *testing.T) {
	const repo = "https://git.example.com/ops/fleet.git (main, configs)"
	h := dashHarness(t, trackerFleet(2), Options{Token: writeTok, ConfigPath: repo, PollGit: func() {}})
	code, body := h.do(t, "GET", "/summary", writeTok, nil)
	if code != http.StatusOK {
		t.Fatalf("/summary: %d %s", code, body)
	}
	var s summaryBody
	decode(t, body, &s)
	if s.Mode != "git" || s.ConfigPath != repo {
		t.Fatalf("mode %q path %q, want git and %q", s.Mode, s.ConfigPath, repo)
	}
}
