package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// A Git source's credential, planted in the URL or in the credentials
// file, is shown nowhere: not in /status (a failed poll's error names the
// repository), /summary, /metrics, the webhook's answer, the log, or
// pylon status.
func TestGitCredentialsAreNeverShown(t *testing.T) {
	const secret = "planted-git-secret-4e1f9a"
	for _, tc := range []struct {
		name string
		git  func(url string) daemon.GitOptions
	}{
		{"in the URL", func(url string) daemon.GitOptions {
			return daemon.GitOptions{URL: strings.Replace(url, "http://", "http://git:"+secret+"@", 1)}
		}},
		{"in the credentials file", func(url string) daemon.GitOptions {
			p := filepath.Join(t.TempDir(), "git-credentials")
			if err := os.WriteFile(p, []byte("git:"+secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return daemon.GitOptions{URL: url, CredentialsFile: p}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := gittest.New(t)
			repo.Commit(map[string]string{"pylon.yaml": "version: 1\nservices:\n- { name: a, endpoints: [{ address: 10.0.0.1, port: 80 }] }\n"})
			logs := &daemontest.LogBuffer{}
			o := tc.git(repo.ServeHTTP(secret))
			o.Poll, o.MinGap = time.Hour, time.Millisecond
			d := daemontest.Start(t, daemon.Options{Git: o, DebounceQuiet: daemontest.Quiet, DebounceMax: daemontest.MaxWait, Logger: logs.Logger()})
			admin, read := d.Token(t, "admin-token"), d.Token(t, "read-token")
			shown := map[string]string{}
			shown["the webhook's answer"] = gitAdmin(t, d, admin, http.MethodPost, "/v1/sources/git/poll")

			// A failed poll: its error, naming the repository, is in
			// /status.
			repo.Tag("v1")
			repo.DeleteBranch(gittest.Branch)
			gitAdmin(t, d, admin, http.MethodPost, "/v1/sources/git/poll")
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(shown["/status"], `no branch or tag \"main\"`) {
				if time.Now().After(deadline) {
					t.Fatalf("/status never showed the failed poll:\n%s", shown["/status"])
				}
				time.Sleep(20 * time.Millisecond)
				shown["/status"] = gitAdmin(t, d, read, http.MethodGet, "/status")
			}
			if !strings.Contains(shown["/status"], "127.0.0.1") {
				t.Fatalf("/status's error does not name the repository:\n%s", shown["/status"])
			}
			shown["/summary"] = gitAdmin(t, d, read, http.MethodGet, "/summary")
			shown["/metrics"] = gitAdmin(t, d, read, http.MethodGet, "/metrics")
			var out, errb bytes.Buffer
			args := []string{"status", "--admin-addr", d.Admin, "--read-token-file", filepath.Join(d.DataDir, "read-token")}
			cli.Execute(context.Background(), args, &out, &errb)
			shown["pylon status"] = out.String() + errb.String()
			shown["the log"] = logs.String()
			basic := base64.StdEncoding.EncodeToString([]byte("git:" + secret))
			for what, text := range shown {
				if strings.Contains(text, secret) || strings.Contains(text, basic) {
					t.Errorf("%s shows the Git credential:\n%s", what, text)
				}
			}
			if !strings.Contains(shown["pylon status"], "REFUSED") {
				t.Errorf("pylon status does not show the failed poll:\n%s", shown["pylon status"])
			}
		})
	}
}

// gitAdmin is the body of one admin call with token.
func gitAdmin(t *testing.T, d *daemontest.Daemon, token, method, path string) string {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.Admin+path, nil)
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
	return string(b)
}
