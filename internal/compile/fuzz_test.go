package compile

import (
	"errors"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// FuzzCompile runs the whole compile (decode, model checks, translation,
// validation, groups, listener clashes) on arbitrary bytes, reading no
// files. Invariants: no panic; an error is a diag.List whose diagnostics
// each name the file; an accepted config compiles again to the same
// version (versions are content hashes, so replicas and restarts agree).
// Seeds: testdata/fuzz/FuzzCompile (the golden inputs and the examples).
func FuzzCompile(f *testing.F) {
	f.Add([]byte("services:\n- {name: web, endpoints: [{address: 10.0.0.1, port: 80}]}\nlisteners:\n- {name: l, port: 80, protocol: tcp, service: web}\n"))
	f.Add([]byte(`{"groups": [{"name": "g", "default": true, "identities": ["spiffe://td/*"]}], "resources": []}`))
	reg := xdstype.New()
	compile := func(data []byte) (string, error) {
		fleet, err := Compile(reg, []config.File{{Path: "fuzz.yaml", Data: data}}, nil)
		if err != nil {
			return "", err
		}
		return fleet.Version(), nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > config.MaxFileBytes {
			t.Skip()
		}
		v, err := compile(data)
		if err != nil {
			var dl diag.List
			if !errors.As(err, &dl) || len(dl) == 0 {
				t.Fatalf("error is not a diag.List: %T %v", err, err)
			}
			for _, d := range dl {
				if d.File == "" || d.Message == "" {
					t.Fatalf("diagnostic does not name a file or say what is wrong: %+v", d)
				}
			}
			return
		}
		if again, err := compile(data); err != nil || again != v {
			t.Fatalf("the same input compiled to %s, then %s (%v)", v, again, err)
		}
	})
}
