package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// gitConfig is a config of one service per name, with xdstest's probe
// (ExpectSilence).
func gitConfig(names ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\nresources:\n- \"@type\": type.googleapis.com/envoy.service.runtime.v3.Runtime\n  name: " + xdstest.ProbeName + "\n")
	b.WriteString("services:\n")
	for _, n := range names {
		b.WriteString("- { name: " + n + ", endpoints: [{ address: 10.0.0.1, port: 80 }] }\n")
	}
	return b.String()
}

// adminCall sends one admin request with token and returns the status
// code and the body.
func adminCall(t *testing.T, d *daemontest.Daemon, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.Admin+path, strings.NewReader(`{"ref": "refs/heads/main"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// configStatus waits, within a bound, for /status's config to satisfy ok,
// and returns it and the body it came in.
func configStatus(t *testing.T, d *daemontest.Daemon, token string, ok func(pipeline.Status) bool) (pipeline.Status, string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := adminCall(t, d, http.MethodGet, "/status", token)
		var st struct {
			Config pipeline.Status `json:"config"`
		}
		if code != http.StatusOK {
			t.Fatalf("GET /status: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if ok(st.Config) {
			return st.Config, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /status never showed the state awaited:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterNames are the clusters of a CDS response.
func clusterNames(t *testing.T, s *xdstest.Stream) []string {
	t.Helper()
	resp := s.RecvType(xdstype.ClusterURL)
	var names []string
	for _, a := range resp.Resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Name)
	}
	s.ACK(resp)
	slices.Sort(names)
	return names
}

// The daemon serves a folder of a Git repository, over file://, over
// smart HTTP behind a token and over SSH with a key and a pinned host: a push, polled at once by the webhook,
// reaches an xDS client and /status names its commit; a bad push is
// refused with its file and line, and the last good commit keeps serving.
// The token is never shown.
func TestGitSourceServesPushesAndRefusesABadOne(t *testing.T) {
	const token = "git-token-7f3a9c2e51d4"
	private := func(t *testing.T, name string, data []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		git  func(*testing.T, *gittest.Repo) daemon.GitOptions
	}{
		{"file", func(_ *testing.T, r *gittest.Repo) daemon.GitOptions { return daemon.GitOptions{URL: r.FileURL()} }},
		{"smart-http", func(t *testing.T, r *gittest.Repo) daemon.GitOptions {
			return daemon.GitOptions{URL: r.ServeHTTP(token), CredentialsFile: private(t, "git-credentials", []byte(token+"\n"))}
		}},
		{"ssh", func(t *testing.T, r *gittest.Repo) daemon.GitOptions {
			key := gittest.NewSSHKey(t)
			url, known := r.ServeSSH(key.Public)
			return daemon.GitOptions{URL: url, CredentialsFile: private(t, "id_ed25519", key.Private), KnownHostsFile: private(t, "known_hosts", []byte(known+"\n"))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := gittest.New(t)
			o := tc.git(t, repo)
			o.Path, o.Poll, o.MinGap = "configs", time.Hour, time.Millisecond
			servesPushes(t, repo, o, token)
		})
	}
}

// servesPushes is TestGitSourceServesPushesAndRefusesABadOne with o on
// repo; token must never be shown.
func servesPushes(t *testing.T, repo *gittest.Repo, o daemon.GitOptions, token string) {
	first := repo.Commit(map[string]string{"configs/pylon.yaml": gitConfig("a"), "README.md": "the fleet's config"})
	logs := &daemontest.LogBuffer{}
	d := daemontest.Start(t, daemon.Options{Git: o, DebounceQuiet: daemontest.Quiet, DebounceMax: daemontest.MaxWait, Logger: logs.Logger()})
	admin := d.Token(t, "admin-token")
	configStatus(t, d, admin, func(st pipeline.Status) bool { return st.Revision == first })

	s := xdstest.OpenADS(t, xdstest.Dial(t, d.XDS), xdstest.Node("n1"))
	s.Request(xdstype.ClusterURL)
	if got := clusterNames(t, s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("clusters at the first commit: %v, want [a]", got)
	}

	second := repo.Commit(map[string]string{"configs/pylon.yaml": gitConfig("a", "b")})
	if code, body := adminCall(t, d, http.MethodPost, "/v1/sources/git/poll", admin); code != http.StatusAccepted {
		t.Fatalf("webhook: %d %s", code, body)
	}
	if got := clusterNames(t, s); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("clusters after the push: %v, want [a b]", got)
	}
	configStatus(t, d, admin, func(st pipeline.Status) bool { return st.Revision == second })

	bad := repo.Commit(map[string]string{"configs/pylon.yaml": gitConfig("a", "b") + "- { name: c, bogus: 1 }\n"})
	adminCall(t, d, http.MethodPost, "/v1/sources/git/poll", admin)
	st, body := configStatus(t, d, admin, func(st pipeline.Status) bool { return st.Refused != nil })
	if st.Revision != second || st.Refused.Revision != bad {
		t.Fatalf("after a bad push: serving %s, refused %s; want %s served, %s refused", st.Revision, st.Refused.Revision, second, bad)
	}
	if len(st.Refused.Diagnostics) == 0 || st.Refused.Diagnostics[0].File != "configs/pylon.yaml" || st.Refused.Diagnostics[0].Line != 8 {
		t.Fatalf("the refusal does not name configs/pylon.yaml line 8: %+v", st.Refused)
	}
	s.ExpectSilence()
	texts := map[string]string{"/status after the bad push": body}

	// The branch deleted (a tag left): refused, naming it; the last good
	// keeps serving.
	repo.Tag("v1")
	repo.DeleteBranch(gittest.Branch)
	adminCall(t, d, http.MethodPost, "/v1/sources/git/poll", admin)
	st, texts["/status without the branch"] = configStatus(t, d, admin, func(st pipeline.Status) bool {
		return st.Refused != nil && strings.Contains(st.Refused.Error, `no branch or tag "main"`)
	})
	if st.Revision != second {
		t.Fatalf("without the branch: serving %s, want %s", st.Revision, second)
	}
	s.ExpectSilence()

	// Pushed again, fixed: served, the refusal cleared.
	fixed := repo.Commit(map[string]string{"configs/pylon.yaml": gitConfig("c")})
	adminCall(t, d, http.MethodPost, "/v1/sources/git/poll", admin)
	if got := clusterNames(t, s); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("clusters after the fix: %v, want [c]", got)
	}
	configStatus(t, d, admin, func(st pipeline.Status) bool { return st.Revision == fixed && st.Refused == nil })
	code, metrics := adminCall(t, d, http.MethodGet, "/metrics", admin)
	for _, want := range []string{`pylon_git_commit_info{commit="` + fixed + `"} 1`, `pylon_git_polls_total{result="read"} 4`, `pylon_git_polls_total{result="failed"} 1`, "pylon_git_last_success_timestamp_seconds "} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s:\n%s", code, want, grep(metrics, "pylon_git_"))
		}
	}
	texts["/metrics"] = metrics
	texts["the log"] = logs.String()
	for what, text := range texts {
		if strings.Contains(text, token) {
			t.Errorf("%s shows the Git token:\n%s", what, text)
		}
	}
}

// grep is text's lines that contain s.
func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A Git source with a wrong token does not start: there is no last good
// config to keep, and the error names the cause, not the token.
func TestGitSourceWithAWrongTokenDoesNotStart(t *testing.T) {
	const wrong = "wrong-token-0b8e1d4c"
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": gitConfig("a")})
	creds := filepath.Join(t.TempDir(), "git-credentials")
	if err := os.WriteFile(creds, []byte(wrong), 0o600); err != nil {
		t.Fatal(err)
	}
	err := daemontest.Refusal(t, daemon.Options{Git: daemon.GitOptions{URL: repo.ServeHTTP("right-token-5a6b7c8d"), CredentialsFile: creds}})
	if err == nil || !strings.Contains(err.Error(), "authentication required") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("start with a wrong token: %v", err)
	}
}

// A Git source over file:// with another source of config is refused.
func TestGitSourceIsTheOnlySource(t *testing.T) {
	repo := gittest.New(t)
	repo.Commit(map[string]string{"pylon.yaml": gitConfig("a")})
	err := daemontest.Refusal(t, daemon.Options{ConfigPath: t.TempDir(), Git: daemon.GitOptions{URL: repo.FileURL()}})
	if err == nil || !strings.Contains(err.Error(), "--config-git and --config") {
		t.Fatalf("--config-git with --config: %v", err)
	}
}
