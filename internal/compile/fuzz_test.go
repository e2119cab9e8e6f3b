package compile

import (
	"errors"
	"path"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// FuzzCompile runs the whole compile (decode, model checks, translation,
// validation, groups, listener clashes) on arbitrary bytes, reading no
// files. Invariants: no panic; an error is a diag.List whose diagnostics
// each name the file; an accepted config compiles again to the same
// version (versions are content hashes, so replicas and restarts agree),
// and the shard of each of its groups (--groups) serves the group what
// the whole compile does.
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
		shardsServeAsTheWhole(t, reg, data)
	})
}

// shardsServeAsTheWhole checks that a shard of each group of an accepted
// config accepts it and serves the group the whole compile's snapshot.
func shardsServeAsTheWhole(t *testing.T, reg *xdstype.Registry, data []byte) {
	files := []config.File{{Path: "fuzz.yaml", Data: data}}
	whole, err := Compile(reg, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range whole.Groups() {
		if ok, _ := path.Match(g.Name, g.Name); !ok {
			continue // a name a selector cannot take as itself
		}
		shard, err := (&Cache{Groups: fleet.Selector{g.Name}}).Compile(reg, files, nil)
		if err != nil {
			t.Fatalf("the shard of group %s refused what the whole compile accepts: %v", g.Name, err)
		}
		if got, _ := shard.Lookup(g.Name); got == nil || got.Snapshot.Version() != g.Snapshot.Version() {
			t.Fatalf("the shard of group %s serves it another snapshot than the whole compile", g.Name)
		}
	}
}
