package compile

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestCompileGolden compiles each testdata/compile input and compares the
// result (the resources with their versions, or the diagnostics) with the
// .golden file beside it. Run with -update to rewrite the golden files; that
// also deletes golden files whose input is gone.
func TestCompileGolden(t *testing.T) {
	dir := filepath.Join("testdata", "compile")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := xdstype.New()
	inputs := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".golden") {
			continue
		}
		base := strings.TrimSuffix(name, filepath.Ext(name))
		inputs[base] = true
		t.Run(base, func(t *testing.T) {
			path := filepath.Join(dir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := render(reg, config.File{Path: path, Data: data})
			golden := filepath.Join(dir, base+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (run with -update if the change is intended)\n--- got\n%s--- want\n%s", path, golden, got, want)
			}
		})
	}
	if *update {
		for _, e := range entries {
			if base, ok := strings.CutSuffix(e.Name(), ".golden"); ok && !inputs[base] {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// render is the golden form of a compile: per group, the snapshot version
// and every resource's type, name and version; or the refusal.
func render(reg *xdstype.Registry, f config.File) string {
	fleet, err := Compile(reg, []config.File{f})
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "refused:\n%s\n", err)
		return b.String()
	}
	for _, g := range fleet.Groups() {
		fmt.Fprintf(&b, "group %s snapshot %s\n", g.Name, g.Snapshot.Version())
		for _, set := range g.Snapshot.Sets() {
			for _, n := range set.Names() {
				fmt.Fprintf(&b, "  %s %s %s\n", set.Type().Kind, n, set.Get(n).Version)
			}
		}
	}
	return b.String()
}
