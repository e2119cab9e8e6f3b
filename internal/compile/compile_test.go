package compile

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/golden"
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
		if e.IsDir() || strings.HasSuffix(name, ".golden") {
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
			got := render(reg, config.File{Path: path, Data: data, Dir: dir})
			golden.Check(t, filepath.Join(dir, base+".golden"), got, *update)
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
	fleet, err := Compile(reg, []config.File{f}, os.ReadFile)
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "refused:\n%s\n", err)
		return b.String()
	}
	policy := fleet.SecretPolicy()
	for _, n := range slices.Sorted(maps.Keys(policy)) {
		fmt.Fprintf(&b, "secret %s to %v\n", n, policy[n])
	}
	for i, g := range fleet.Groups() {
		fmt.Fprintf(&b, "group %s snapshot %s\n", g.Name, g.Snapshot.Version())
		if ids := fleet.Rules()[i].Identities; len(ids) > 0 {
			fmt.Fprintf(&b, "  identities %v\n", ids)
		}
		for _, set := range g.Snapshot.Sets() {
			for _, n := range set.Names() {
				fmt.Fprintf(&b, "  %s %s %s\n", set.Type().Kind, n, set.Get(n).Version)
			}
		}
	}
	return b.String()
}

// A scope cuts a group's clusters to what its roots name, over the wire
// format's own resources: the payments sidecar sees one cluster of four.
func TestScopeCutsClusters(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "compile", "groups_scoped.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := Compile(xdstype.New(), []config.File{{Path: "groups_scoped.yaml", Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, g := range fleet.Groups() {
		got[g.Name] = g.Snapshot.Set(xdstype.ClusterURL).Names()
	}
	want := map[string][]string{
		"edge":             {"api", "web"},
		"payments-sidecar": {"payments"},
		"everyone-else":    {"api", "payments", "users", "web"},
	}
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("group %s clusters %v, want %v", name, got[name], w)
		}
	}
	// Groups share encodings: the same resource is the same object.
	a := fleet.Groups()[0].Snapshot.Set(xdstype.ClusterURL).Get("web")
	b := fleet.Groups()[2].Snapshot.Set(xdstype.ClusterURL).Get("web")
	if a != b {
		t.Error("a resource was encoded once per group")
	}
}

// A secret policy is part of the fleet's version: changing only who may
// receive a secret must reach the streams, so it must change the version.
func TestSecretPolicyChangesVersion(t *testing.T) {
	dir := filepath.Join("testdata", "compile")
	compileWith := func(identities string) *fleet.Fleet {
		t.Helper()
		data := "secrets:\n- name: edge-cert\n  cert_file: certs/edge.crt\n  key_file: certs/edge.key\n" + identities
		fleet, err := Compile(xdstype.New(), []config.File{{Path: filepath.Join(dir, "policy.yaml"), Data: []byte(data), Dir: dir}}, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		return fleet
	}
	open := compileWith("")
	a := compileWith("  identities: [spiffe://example.org/a]\n")
	b := compileWith("  identities: [spiffe://example.org/b]\n")
	if open.Version() == a.Version() || a.Version() == b.Version() || open.Version() == b.Version() {
		t.Errorf("versions open %s, a %s, b %s: a policy change must change the version", open.Version(), a.Version(), b.Version())
	}
	snapA := a.Groups()[0].Snapshot
	if a.SecretAllowed(snapA, "edge-cert", []string{"spiffe://example.org/b"}) || !a.SecretAllowed(snapA, "edge-cert", []string{"spiffe://example.org/a"}) {
		t.Error("the compiled policy does not say who may receive edge-cert")
	}
	// The snapshot carries the policy it was published with, for when it
	// outlives the fleet (a staged rollout's previous snapshot).
	if got := snapA.SecretPolicy()["edge-cert"]; len(got) != 1 || got[0] != "spiffe://example.org/a" {
		t.Errorf("the snapshot carries the policy %v for edge-cert", snapA.SecretPolicy())
	}
	// The snapshots themselves are the same: only the policy changed.
	if open.Groups()[0].Snapshot.Version() != a.Groups()[0].Snapshot.Version() {
		t.Error("a policy change changed the snapshot")
	}
}

// Duplicates across the files of a folder are refused like duplicates in
// one file, naming both files.
func TestDuplicatesAcrossFiles(t *testing.T) {
	a := config.File{Path: "conf/a.yaml", Data: []byte("services:\n- { name: web, endpoints: [{ address: 10.0.0.1, port: 80 }] }\n")}
	b := config.File{Path: "conf/b.yaml", Data: []byte("# b\nservices:\n- { name: web, endpoints: [{ address: 10.0.0.2, port: 80 }] }\n")}
	_, err := Compile(xdstype.New(), []config.File{a, b}, nil)
	want := `conf/b.yaml:3: service "web": name: duplicate: service "web" is already defined at conf/a.yaml:2`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
