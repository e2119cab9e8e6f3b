package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// bootstrap, explain and render describe a node with the same flags:
// --node-id, --cluster, --locality and --metadata. The spellings they had
// before (--node-cluster, explain's --node) still work, hidden from help,
// with a one-line warning naming the new one.
func TestNodeFlagsSpelledAlike(t *testing.T) {
	const cfg = "../../examples/quickstart.yaml"
	node := []string{"--node-id", "edge-1", "--cluster", "edge", "--locality", "eu/eu-b", "--metadata", "team=web"}
	for _, c := range []struct {
		args []string
		out  string
	}{
		{append([]string{"bootstrap"}, node...), "cluster: edge"},
		{append([]string{"explain", "--config", cfg, "GET http://127.0.0.1:10000/backend", "--port", "10000"}, node...), `node          "edge-1"`},
		{append([]string{"render", "--config", cfg, "--out", filepath.Join(t.TempDir(), "out")}, node...), "edge-1"},
	} {
		code, out, stderr := run(c.args...)
		if code != 0 || !strings.Contains(out, c.out) || stderr != "" {
			t.Errorf("pylon %v: exit %d, stderr %q, stdout lacks %q:\n%s", c.args, code, stderr, c.out, out)
		}
		_, help, _ := run(c.args[0], "--help")
		for _, f := range []string{"--node-id", "--cluster", "--locality", "--metadata"} {
			if !strings.Contains(help, f+" ") {
				t.Errorf("pylon %s --help lacks %s", c.args[0], f)
			}
		}
		if strings.Contains(help, "--node-cluster") || strings.Contains(help, "--node ") {
			t.Errorf("pylon %s --help shows an old spelling:\n%s", c.args[0], help)
		}
	}
	for _, c := range []struct {
		args []string
		old  string
		out  string
	}{
		{[]string{"bootstrap", "--node-id", "edge-1", "--node-cluster", "edge"}, "--node-cluster", "cluster: edge"},
		{[]string{"explain", "--config", cfg, "--node", "edge-1", "GET http://127.0.0.1:10000/backend", "--port", "10000"}, "--node", `node          "edge-1"`},
	} {
		code, out, stderr := run(c.args...)
		want := "pylon: " + c.old + " is deprecated: use --"
		if code != 0 || !strings.Contains(out, c.out) || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("pylon %v: exit %d, stderr %q (want one line %q...), stdout:\n%s", c.args, code, stderr, want, out)
		}
	}
}
