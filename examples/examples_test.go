package examples_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/secretfile"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Every example in this folder must be a config Pylon accepts, read as the
// README applies it: to a `pylon serve` started in the repository's root,
// whose first secret directory is that root (test/readme runs the flow).
func TestExamplesCompile(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	secrets, err := secretfile.New([]string{".."}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := xdstype.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fleet, err := compile.Compile(reg, []config.File{{Path: f, Data: data}}, secrets.Read)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, g := range fleet.Groups() {
			if g.Snapshot.Set(xdstype.ListenerURL).Len() == 0 {
				t.Errorf("%s: group %s has no listeners", f, g.Name)
			}
		}
	}
	// The sidecar example's scoping: each app's sidecars see only what their
	// own listeners lead to.
	data, err := os.ReadFile("sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := compile.Compile(reg, []config.File{{Path: "sidecar.yaml", Data: data}}, compile.LimitedReader)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"payments-sidecars": {"ledger", "payments-local"},
		"checkout-sidecars": {"checkout-local", "inventory", "payments"},
	}
	for _, g := range fleet.Groups() {
		if got := g.Snapshot.Set(xdstype.ClusterURL).Names(); !slices.Equal(got, want[g.Name]) {
			t.Errorf("group %s gets clusters %v, want %v", g.Name, got, want[g.Name])
		}
	}
	if _, err := compile.Compile(reg, []config.File{{Path: examples.QuickstartName, Data: examples.Quickstart()}}, nil); err != nil {
		t.Fatalf("embedded quickstart: %v", err)
	}
}
