package surface

import (
	"os"
	"slices"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	pconfig "github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A group's scope follows the new references: a listener brings the
// extension configs its filters name, a scope (named by the
// scoped_routes kind, since SRDS scopes are not named by the listener)
// its route configuration; runtimes are scoped by name.
func TestGroupScopes(t *testing.T) {
	doc, err := os.ReadFile("../../examples/extensions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	groups := `
groups:
- name: tenant-a
  match: { id: "a-*" }
  scope: { listeners: [tenants], scoped_routes: [tenant-a] }
- name: runtime-only
  default: true
  scope: { runtimes: [overrides] }
`
	reg := xdstype.New()
	fleet, err := compile.Compile(reg, []pconfig.File{{Path: "extensions.yaml", Data: append(doc, groups...)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{
		"tenant-a": {
			xdstype.ListenerURL:      {"tenants"},
			xdstype.ExtensionConfURL: {"fault"},
			xdstype.ScopedRouteURL:   {"tenant-a"},
			xdstype.RouteURL:         {"tenant-a-routes"},
			xdstype.RuntimeURL:       nil,
		},
		"runtime-only": {
			xdstype.RuntimeURL:       {"overrides"},
			xdstype.ExtensionConfURL: nil,
			xdstype.ScopedRouteURL:   nil,
		},
	}
	for _, g := range fleet.Groups() {
		for url, names := range want[g.Name] {
			if got := g.Snapshot.Set(url).Names(); !slices.Equal(got, names) {
				t.Errorf("group %s: %s %v, want %v", g.Name, reg.Lookup(url).Abbrev, got, names)
			}
		}
		delete(want, g.Name)
	}
	if len(want) != 0 {
		t.Errorf("groups missing: %v", want)
	}
}
