package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// envoyHalf is the quickstart without its proxyless gRPC half: the same
// kinds of resource (Listener, RouteConfiguration, Cluster,
// ClusterLoadAssignment), without the greeter of each.
func envoyHalf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(b), "# --- Proxyless gRPC")
	if !ok {
		t.Fatal("the quickstart no longer has its proxyless gRPC section")
	}
	return head
}

// objectNames are the stored objects' kind/name, from get objects -o json.
func objectNames(t *testing.T, d *testPylon) map[string]bool {
	t.Helper()
	var body struct {
		Objects []struct{ Kind, Name string } `json:"objects"`
	}
	if err := json.Unmarshal([]byte(d.must(t, "get", "objects", "-o", "json")), &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range body.Objects {
		out[o.Kind+"/"+o.Name] = true
	}
	return out
}

func historyLen(t *testing.T, d *testPylon) int {
	t.Helper()
	var h struct {
		History []json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal([]byte(d.must(t, "history", "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	return len(h.History)
}

// apply --prune makes the document the whole config of the kinds it
// names: what the store has of those kinds and the document lacks is
// deleted, with the document's objects written, in one revision; a dry
// run lists what would be created, changed and deleted and stores
// nothing; an empty document is refused, not read as "delete everything".
func TestApplyPruneMakesTheDocumentTheWholeConfig(t *testing.T) {
	d := startServe(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "envoy.yaml")
	writeFile(t, doc, envoyHalf(t))
	greeter := []string{"resources.Listener/greeter", "resources.RouteConfiguration/greeter", "resources.Cluster/greeter", "resources.ClusterLoadAssignment/greeter"}

	out := d.must(t, "apply", doc, "--prune", "--dry-run")
	for _, g := range greeter {
		if !strings.Contains(out, "- "+g+"\n") {
			t.Errorf("the dry run does not say %s goes:\n%s", g, out)
		}
	}
	if !strings.Contains(out, "dry run: nothing stored") || strings.Contains(out, "backend") {
		t.Errorf("dry run output:\n%s", out)
	}
	if !objectNames(t, d)["resources.Cluster/greeter"] {
		t.Fatal("a dry run deleted greeter")
	}

	before := historyLen(t, d)
	out = d.must(t, "apply", doc, "--prune")
	if !strings.Contains(out, "stored as revision") {
		t.Errorf("apply --prune:\n%s", out)
	}
	objs := objectNames(t, d)
	for _, g := range greeter {
		if objs[g] {
			t.Errorf("%s is still stored after apply --prune", g)
		}
	}
	if !objs["resources.Cluster/backend"] || !objs["resources.Listener/http"] {
		t.Errorf("apply --prune deleted what the document has: %v", objs)
	}
	if n := historyLen(t, d); n != before+1 {
		t.Errorf("history went from %d to %d entries, want one revision for the whole prune", before, n)
	}

	empty := filepath.Join(dir, "empty.yaml")
	writeFile(t, empty, "version: 1\n# nothing yet\n")
	code, _, stderr := d.cli("apply", empty, "--prune")
	if code != 1 || !strings.Contains(stderr, "no objects passed to apply") {
		t.Errorf("apply --prune of an empty document: exit %d, %q", code, stderr)
	}
}

// The document may be named by -f or as the argument, not both.
func TestApplyTakesTheFileAsArgument(t *testing.T) {
	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "envoy.yaml")
	writeFile(t, doc, envoyHalf(t))
	// The store holds the quickstart, which has all of the document:
	// both applies are read, validated and found to change nothing.
	if out := d.must(t, "apply", doc); !strings.Contains(out, "no change") {
		t.Errorf("apply FILE:\n%s", out)
	}
	if out := d.must(t, "apply", "-f", doc); !strings.Contains(out, "no change") {
		t.Errorf("apply -f FILE, the same document again:\n%s", out)
	}
	for _, args := range [][]string{{"apply"}, {"apply", doc, "-f", doc}, {"apply", doc, doc}} {
		if code, _, stderr := d.cli(args...); code != 1 || !strings.Contains(stderr, "FILE") {
			t.Errorf("pylon %v: exit %d, %q", args, code, stderr)
		}
	}
}

// An apply or a prune of what the store already has stores nothing: no
// revision, no history entry (a GitOps loop applying the same document
// every minute would otherwise push every real rollback point out of the
// history), and the CLI says so.
func TestApplyOfTheStoredConfigSaysNoChange(t *testing.T) {
	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "envoy.yaml")
	writeFile(t, doc, envoyHalf(t))
	d.must(t, "apply", doc, "--prune")
	before := historyLen(t, d)
	for _, args := range [][]string{{"apply", doc}, {"apply", doc, "--prune"}} {
		out := d.must(t, args...)
		if !strings.Contains(out, "no change") || strings.Contains(out, "stored as revision") {
			t.Errorf("pylon %v again:\n%s", args, out)
		}
	}
	if out := d.must(t, "apply", doc, "--dry-run"); !strings.Contains(out, "dry run: no change") {
		t.Errorf("apply --dry-run of the stored config:\n%s", out)
	}
	if n := historyLen(t, d); n != before {
		t.Errorf("history went from %d to %d entries on applies that change nothing", before, n)
	}
}
