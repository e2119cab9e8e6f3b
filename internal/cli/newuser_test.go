package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
)

// `pylon get` without a kind says which kinds there are, as a wrong kind
// does, instead of cobra's count of arguments; it needs no running Pylon.
func TestGetWithoutKindListsTheKinds(t *testing.T) {
	code, _, stderr := run("get")
	if code == 0 || !strings.Contains(stderr, "say what to list: "+getKinds) {
		t.Fatalf("pylon get: exit %d, stderr %q; want the kinds listed", code, stderr)
	}
	code, _, stderr = run("get", "clusters", "routes")
	if code == 0 || !strings.Contains(stderr, "one kind at a time") {
		t.Fatalf("pylon get clusters routes: exit %d, stderr %q", code, stderr)
	}
}

// `pylon status` with no proxy connected says so under the table's head,
// with how to connect one, rather than an empty table.
func TestStatusWithoutProxiesSaysSo(t *testing.T) {
	var b strings.Builder
	if err := proxyTable(&b, pipeline.Status{Version: "v1"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "NAME ") || !strings.Contains(got, "\nNo proxy connected: ") || !strings.Contains(got, "pylon bootstrap --node-id") {
		t.Fatalf("status without proxies:\n%s", got)
	}
}

// Another replica's stream read before etcd became unreachable shows
// UNKNOWN in every type it subscribes to, its replica with how old its
// state is; a fresh stream of the same node (it moved here) wins.
func TestStaleStreamsShowUnknown(t *testing.T) {
	types := []*status.Type{{Type: "CDS", State: status.Synced}, {Type: "LDS", State: status.Synced}}
	stale := fleetStream{Replica: "b", Stale: true, AgeSeconds: 12, Stream: status.Stream{Node: "n1", Group: "g", Types: types}}
	var b strings.Builder
	if err := proxyTable(&b, pipeline.Status{}, []fleetStream{stale}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); strings.Contains(got, "SYNCED") || strings.Count(got, "UNKNOWN") != 2 || !strings.Contains(got, "b (as of 12s ago)") {
		t.Errorf("a stale stream:\n%s", got)
	}
	fresh := fleetStream{Replica: "a", Stream: status.Stream{Node: "n1", Group: "g", Types: types}}
	b.Reset()
	if err := proxyTable(&b, pipeline.Status{}, []fleetStream{fresh, stale}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); strings.Count(got, "SYNCED") != 2 || strings.Contains(got, "UNKNOWN") {
		t.Errorf("a node on this replica and, stale, on another:\n%s", got)
	}
}

// explain's own lines (node, config, rollout) line up with the route's,
// however wide the route's labels are ("direct response").
func TestExplainLinesAlign(t *testing.T) {
	// The quickstart's first route answers itself: a direct response.
	cfg := filepath.Join("..", "..", "examples", "quickstart.yaml")
	code, out, stderr := run("explain", "--config", cfg, "--node-id", "n1", "http://localhost:10000/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	col := -1
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "cluster ") || l == "" {
			continue
		}
		label, rest, _ := strings.Cut(l, "  ")
		c := len(label) + 2 + len(rest) - len(strings.TrimLeft(rest, " "))
		if col >= 0 && c != col {
			t.Fatalf("line %q starts its value at column %d, the others at %d:\n%s", l, c, col, out)
		}
		col = c
	}
}
