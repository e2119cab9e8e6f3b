package examples_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Every example in this folder must be a config Pylon accepts.
func TestExamplesCompile(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	reg := xdstype.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := pipeline.Compile(reg, []config.File{{Path: f, Data: data}})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if snap.Set(xdstype.ListenerURL).Len() == 0 {
			t.Errorf("%s: no listeners", f)
		}
	}
	if _, err := pipeline.Compile(reg, []config.File{{Path: examples.QuickstartName, Data: examples.Quickstart()}}); err != nil {
		t.Fatalf("embedded quickstart: %v", err)
	}
}
