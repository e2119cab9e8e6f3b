// Package gittest serves Git repositories to tests with the git binary: a
// bare repository that a working clone commits and pushes to, read over
// file:// and over Git's smart HTTP protocol (git http-backend through
// net/http/cgi, on 127.0.0.1), optionally behind a token.
package gittest

import (
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Branch is the branch Commit pushes to.
const Branch = "main"

// Repo is a bare repository and a working clone of it.
type Repo struct {
	t    testing.TB
	git  string
	root string // holds repo.git
	work string
}

// New makes an empty repository. Without a git binary the test is skipped,
// or fails under CI=true, where a skip would hide the test.
func New(t testing.TB) *Repo {
	t.Helper()
	bin, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the git binary is not on PATH; the Git source's tests need it to serve repositories")
		}
		t.Skip("skipped: the git binary is not on PATH (it serves the test repositories)")
	}
	r := &Repo{t: t, git: bin, root: t.TempDir(), work: t.TempDir()}
	r.run(r.root, "init", "-q", "--bare", "-b", Branch, "repo.git")
	r.run(r.work, "init", "-q", "-b", Branch)
	r.run(r.work, "remote", "add", "origin", r.bare())
	return r
}

func (r *Repo) bare() string { return filepath.Join(r.root, "repo.git") }

// run runs git in dir with a fixed identity and no user or system config.
func (r *Repo) run(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(r.git, append([]string{"-c", "user.name=Pylon Test", "-c", "user.email=test@pylon.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes files (path in the repository to content; "" removes the
// file), commits them and pushes to Branch. It returns the commit's SHA.
func (r *Repo) Commit(files map[string]string) string {
	r.t.Helper()
	for name, data := range files {
		p := filepath.Join(r.work, filepath.FromSlash(name))
		if data == "" {
			if err := os.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.run(r.work, "add", "-A")
	r.run(r.work, "commit", "-q", "--allow-empty", "-m", "change")
	r.run(r.work, "push", "-q", "origin", "HEAD:"+Branch)
	return r.run(r.work, "rev-parse", "HEAD")
}

// Tag makes a lightweight tag of the last commit and pushes it.
func (r *Repo) Tag(name string) {
	r.t.Helper()
	r.run(r.work, "tag", name)
	r.run(r.work, "push", "-q", "origin", name)
}

// DeleteBranch deletes branch from the repository (even the one its
// HEAD names, which a push may not delete).
func (r *Repo) DeleteBranch(branch string) {
	r.t.Helper()
	r.run(r.bare(), "update-ref", "-d", "refs/heads/"+branch)
}

// FileURL is the repository's file:// URL.
func (r *Repo) FileURL() string { return "file://" + filepath.ToSlash(r.bare()) }

// ServeHTTP serves the repository over smart HTTP on 127.0.0.1 until the
// test ends and returns its URL. With a token, a request must carry it as
// "Authorization: Bearer TOKEN" or as the password of basic auth; others
// get 401, as a Git host answers.
func (r *Repo) ServeHTTP(token string) string {
	r.t.Helper()
	return r.Serve(r.HTTPHandler(token))
}

// Serve serves h on 127.0.0.1 until the test ends and returns the
// repository's URL on it: a test wraps HTTPHandler in a host that
// misbehaves.
func (r *Repo) Serve(h http.Handler) string {
	r.t.Helper()
	srv := httptest.NewServer(h)
	r.t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}

// HTTPHandler is the repository's smart HTTP handler (git http-backend),
// behind token as ServeHTTP says; its paths are under /repo.git/.
func (r *Repo) HTTPHandler(token string) http.Handler {
	backend := &cgi.Handler{
		Path: r.git, Args: []string{"http-backend"}, Dir: r.root,
		Env: []string{"GIT_PROJECT_ROOT=" + r.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if token != "" && !authorized(req, token) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	})
}

func authorized(req *http.Request, token string) bool {
	got := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	if _, pass, ok := req.BasicAuth(); ok {
		got = pass
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// Link commits a symbolic link name pointing to target and pushes it.
func (r *Repo) Link(name, target string) string {
	r.t.Helper()
	p := filepath.Join(r.work, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		r.t.Fatal(err)
	}
	return r.Commit(nil)
}
