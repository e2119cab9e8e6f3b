package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// completions runs cobra's hidden __complete and returns the candidates
// (the lines before the directive) and stderr.
func completions(t *testing.T, d *testPylon, args ...string) ([]string, string) {
	t.Helper()
	// The admin flags go first: __complete completes its last argument.
	var outb, errb bytes.Buffer
	all := append([]string{"__complete", "--admin-addr", d.admin, "--data-dir", d.dataDir}, args...)
	code := execute(context.Background(), all, &outb, &errb, func(k string) string { return d.env[k] })
	out, stderr := outb.String(), errb.String()
	if code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %v: no directive:\n%s", args, out)
	}
	var cands []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t") // a candidate's description follows a tab
		cands = append(cands, name)
	}
	return cands, stderr
}

// The shell completes kinds, object names, node ids and group names from
// the running Pylon's admin API; a Pylon it cannot reach completes nothing
// and prints no error into the operator's prompt.
func TestCompletionFromTheAdminAPI(t *testing.T) {
	d := startServe(t) // the embedded quickstart, one group: default
	s := xdstest.OpenADS(t, xdstest.Dial(t, d.xds), xdstest.Node("edge-7"))
	s.Request(xdstype.ClusterURL)
	s.RecvType(xdstype.ClusterURL)
	eventually(t, "edge-7 in /proxies", func() bool {
		_, out, _ := d.cli("get", "proxies")
		return strings.Contains(out, "edge-7")
	})
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", ""}, []string{"edge-7"}},
		{[]string{"status", "ed"}, []string{"edge-7"}},
		{[]string{"delete", ""}, []string{"resources.Cluster", "resources.ClusterLoadAssignment", "resources.Listener", "resources.RouteConfiguration"}},
		{[]string{"delete", "resources.Cluster", ""}, []string{"backend", "greeter"}},
		{[]string{"delete", "resources.Cluster", "gr"}, []string{"greeter"}},
		{[]string{"get", "cl"}, []string{"clusters"}},
		{[]string{"get", "clusters", "--group", ""}, []string{"default"}},
		{[]string{"rollout", "promote", ""}, []string{"default"}},
		{[]string{"explain", "--group", "d"}, []string{"default"}},
	} {
		got, _ := completions(t, d, c.args...)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("__complete %q: %q, want %q", c.args, got, c.want)
		}
	}
	code, out, _ := d.cli("completion", "bash")
	if code != 0 || !strings.Contains(out, "bash completion") {
		t.Errorf("completion bash: exit %d:\n%.200s", code, out)
	}
	for _, sh := range []string{"zsh", "fish"} {
		if code, out, _ := d.cli("completion", sh); code != 0 || !strings.Contains(out, "pylon") {
			t.Errorf("completion %s: exit %d", sh, code)
		}
	}
	gone := &testPylon{admin: "127.0.0.1:1", dataDir: d.dataDir, env: map[string]string{}}
	got, stderr := completions(t, gone, "status", "")
	if len(got) != 0 || strings.Contains(stderr, "cannot reach") || strings.Contains(stderr, "Error") {
		t.Errorf("with no Pylon: %q, stderr %q", got, stderr)
	}
}
