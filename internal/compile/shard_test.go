package compile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A replica serving some groups (--groups) builds only their snapshots:
// the others are empty and marked Unserved, their nodes still resolve to
// them (so that the xDS server can say which shard serves them).
func TestCompileBuildsOnlyTheGroupsServed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "compile", "groups_scoped.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Groups: fleet.Selector{"edge", "payments-*"}}
	f, err := c.Compile(xdstype.New(), []config.File{{Path: "groups_scoped.yaml", Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"edge": {"api", "web"}, "payments-sidecar": {"payments"}, "everyone-else": nil}
	for _, g := range f.Groups() {
		names := g.Snapshot.Set(xdstype.ClusterURL).Names()
		if !slices.Equal(names, want[g.Name]) || g.Unserved != (want[g.Name] == nil) {
			t.Errorf("group %s: clusters %v, unserved %v; want %v, unserved %v", g.Name, names, g.Unserved, want[g.Name], want[g.Name] == nil)
		}
	}
	// Without a selector, every group is built and served.
	all, err := Compile(xdstype.New(), []config.File{{Path: "groups_scoped.yaml", Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range all.Groups() {
		if g.Unserved || g.Snapshot.Set(xdstype.ClusterURL).Len() == 0 {
			t.Errorf("group %s unserved or empty without --groups", g.Name)
		}
	}
}
