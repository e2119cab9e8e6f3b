package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/source/git/gittest"
)

// serve --config-git serves a folder of a repository at a branch, and
// `pylon status` names the commit served.
func TestServeConfigGit(t *testing.T) {
	repo := gittest.New(t)
	first := repo.Commit(map[string]string{"fleet/pylon.yaml": "services:\n- { name: a, endpoints: [{ address: 10.0.0.1, port: 80 }] }\n"})
	d := startServe(t, "--config-git", repo.FileURL(), "--git-ref", gittest.Branch, "--git-path", "fleet/", "--git-poll", "1h", "--git-timeout", "30s", "--drain-period", "0")
	if out := d.must(t, "status"); !strings.Contains(out, "Serving revision "+first) {
		t.Fatalf("status does not name the commit %s:\n%s", first, out)
	}
	if out := d.must(t, "get", "clusters"); !regexp.MustCompile(`(?m)^default +a +EDS`).MatchString(out) {
		t.Fatalf("the commit's service is not served:\n%s", out)
	}
}

// Git flags that cannot work stop serve before it listens.
func TestServeGitFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config-git", "git://example.com/fleet.git"}, "the scheme must be https, ssh, http or file"},
		{[]string{"--config-git", "ssh://git@example.com/fleet.git"}, "needs --git-credentials-file (a private key) and --git-known-hosts"},
		{[]string{"--config-git", "file:///nonexistent", "--config", "."}, "--config-git and --config"},
		{[]string{"--git-ref", "main"}, "--git-ref needs --config-git"},
	} {
		args := append([]string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, c.args...)
		if code, _, stderr := run(args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, %q; want an error mentioning %q", c.args, code, stderr, c.want)
		}
	}
}
