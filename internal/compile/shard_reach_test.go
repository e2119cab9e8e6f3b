package compile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// shardConfig is two groups, each scoped to its own listener: a's reaches
// route table a and service a1; b's reaches route table b, service b1 and
// the secret b-cert, which only b's identities may have. Service spare is
// reached by no scope.
const shardConfig = `groups:
- name: a
  match: { id: "a-*" }
  scope: { listeners: [la] }
- name: b
  match: { id: "b-*" }
  identities: ["spiffe://example.org/b/*"]
  scope: { listeners: [lb] }
services:
- { name: a1, endpoints: [{ address: 10.0.0.1, port: 80 }] }
- { name: b1, endpoints: [{ address: 10.0.1.1, port: 80 }] }
- { name: spare, endpoints: [{ address: 10.0.2.1, port: 80 }] }
routes:
- name: ra
  virtual_hosts: [{ name: a, domains: ["*"], routes: [{ to: [{ service: a1 }] }] }]
- name: rb
  virtual_hosts: [{ name: b, domains: ["*"], routes: [{ to: [{ service: b1 }] }] }]
listeners:
- { name: la, port: 8080, routes: ra }
- { name: lb, port: 8443, routes: rb, tls: { secret: b-cert } }
secrets:
- name: b-cert
  cert_file: certs/edge.crt
  key_file: certs/edge.key
  identities: ["spiffe://example.org/b/*"]
`

// countingReader reads the test's certificate files and notes each path
// read.
type countingReader struct {
	mu   sync.Mutex
	read []string
}

func (r *countingReader) Read(p string) ([]byte, error) {
	r.mu.Lock()
	r.read = append(r.read, p)
	r.mu.Unlock()
	return os.ReadFile(p)
}

func shardFiles(doc string) []config.File {
	dir := filepath.Join("testdata", "compile")
	return []config.File{{Path: filepath.Join(dir, "shard.yaml"), Data: []byte(doc), Dir: dir}}
}

// translatedServices is what c kept of its last compile's service
// translations: the services it translated or reused.
func translatedServices(c *Cache) []string {
	var out []string
	for n := range c.services.last.services {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// A shard (--groups) translates, reads, encodes and validates only what
// its groups' scopes reach: the other group's service, route table,
// listener and Secret are neither in anything it built nor translated, and
// the Secret's key file is not even read. Its own group's snapshot is the
// one a whole compile gives.
func TestShardBuildsOnlyWhatItsGroupsReach(t *testing.T) {
	reg := xdstype.New()
	reader := &countingReader{}
	c := &Cache{Groups: fleet.Selector{"a"}}
	f, err := c.Compile(reg, shardFiles(shardConfig), reader.Read)
	if err != nil {
		t.Fatal(err)
	}
	if got := translatedServices(c); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("the shard translated the services %v, want [a1] alone", got)
	}
	if len(reader.read) > 0 {
		t.Errorf("the shard read %v: b-cert is group b's alone", reader.read)
	}
	whole, err := Compile(reg, shardFiles(shardConfig), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Lookup("a")
	wholeA, _ := whole.Lookup("a")
	if a.Unserved || a.Snapshot.Version() != wholeA.Snapshot.Version() {
		t.Errorf("group a on the shard: unserved %v, version %s; the whole compile's is %s", a.Unserved, a.Snapshot.Version(), wholeA.Snapshot.Version())
	}
	b, _ := f.Lookup("b")
	for _, set := range b.Snapshot.Sets() {
		if set.Len() > 0 {
			t.Errorf("group b, unserved, holds %d %s", set.Len(), set.Type().Kind)
		}
	}
	for _, set := range a.Snapshot.Sets() {
		for _, n := range set.Names() {
			if strings.HasSuffix(n, "b") || n == "b1" || n == "b-cert" {
				t.Errorf("group a's snapshot holds group b's %s %s", set.Type().Kind, n)
			}
		}
	}
}

// A served group without a scope sees everything, so the shard builds
// everything.
func TestShardOfAGroupWithoutScopeBuildsEverything(t *testing.T) {
	doc := strings.Replace(shardConfig, "  scope: { listeners: [la] }\n", "", 1)
	c := &Cache{Groups: fleet.Selector{"a"}}
	if _, err := c.Compile(xdstype.New(), shardFiles(doc), os.ReadFile); err != nil {
		t.Fatal(err)
	}
	if got := translatedServices(c); !slices.Equal(got, []string{"a1", "b1", "spare"}) {
		t.Errorf("the shard translated the services %v, want all three", got)
	}
}

// A shard reports a problem in what it reaches exactly as the whole
// compile does (file, line, object, field); a problem in what only other
// shards reach is theirs to refuse, and the whole-config check (pylon
// validate, a store's writes: Cache.Whole) still refuses it.
func TestShardReportsProblemsInWhatItReaches(t *testing.T) {
	reg := xdstype.New()
	for _, c := range []struct {
		name, old, new string
		shardRefuses   bool
	}{
		{"dangling in a", "to: [{ service: a1 }]", "to: [{ service: a2 }]", true},
		{"dangling in b", "to: [{ service: b1 }]", "to: [{ service: b2 }]", false},
		{"bad port in b", "address: 10.0.1.1, port: 80", "address: 10.0.1.1, port: 0", false},
		{"bad port in a spare service", "address: 10.0.2.1, port: 80", "address: 10.0.2.1, port: 0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(shardConfig, c.old, c.new, 1)
			_, wholeErr := Compile(reg, shardFiles(doc), os.ReadFile)
			var want diag.List
			if !errors.As(wholeErr, &want) || len(want) != 1 {
				t.Fatalf("the whole compile: %v; want one problem", wholeErr)
			}
			cache := &Cache{Groups: fleet.Selector{"a"}}
			_, err := cache.Compile(reg, shardFiles(doc), os.ReadFile)
			switch {
			case c.shardRefuses && (err == nil || err.Error() != wholeErr.Error()):
				t.Errorf("the shard: %v\nwant the whole compile's %v", err, wholeErr)
			case !c.shardRefuses && err != nil:
				t.Errorf("the shard refused what it does not reach: %v", err)
			}
			if _, err := cache.Whole().Compile(reg, shardFiles(doc), os.ReadFile); err == nil || err.Error() != wholeErr.Error() {
				t.Errorf("the shard's whole-config check: %v\nwant %v", err, wholeErr)
			}
		})
	}
}

// A shard runs the route tests of the groups it serves, on what it serves;
// a test of another group's node is the shards serving it to run (and
// pylon validate's), not a failure on an empty snapshot here.
func TestShardRunsTheRouteTestsOfItsGroups(t *testing.T) {
	tests := `tests:
- name: b serves b1
  node: { id: b-1, identities: ["spiffe://example.org/b/x"] }
  request: { url: "https://b.example.com/", port: 8443, sni: b.example.com }
  expect: { cluster: b1 }
- name: a serves a1
  node: { id: a-1 }
  request: { url: "http://a.example.com/", port: 8080 }
  expect: { cluster: CLUSTER }
`
	reg := xdstype.New()
	doc := shardConfig + strings.Replace(tests, "CLUSTER", "a1", 1)
	if _, err := Compile(reg, shardFiles(doc), os.ReadFile); err != nil {
		t.Fatalf("the whole compile: %v", err)
	}
	c := &Cache{Groups: fleet.Selector{"a"}}
	if _, err := c.Compile(reg, shardFiles(doc), os.ReadFile); err != nil {
		t.Errorf("the shard of group a refused group b's passing test: %v", err)
	}
	doc = shardConfig + strings.Replace(tests, "CLUSTER", "b1", 1)
	if _, err := c.Compile(reg, shardFiles(doc), os.ReadFile); err == nil || !strings.Contains(err.Error(), `route test "a serves a1"`) {
		t.Errorf("the shard of group a accepted its group's failing test: %v", err)
	}
}

// A shard serving every group (a selector that is not nil) builds what a
// whole compile builds from every config of testdata/compile that it
// accepts; from one it refuses, each problem the shard reports is one the
// whole compile reports (a shard skips only what no group reaches).
func TestShardServingEveryGroupBuildsAsTheWholeCompile(t *testing.T) {
	dir := filepath.Join("testdata", "compile")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := xdstype.New()
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".golden") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files := []config.File{{Path: path, Data: data, Dir: dir}}
		whole, wholeErr := Compile(reg, files, os.ReadFile)
		shard, err := (&Cache{Groups: fleet.Selector{"*"}}).Compile(reg, files, os.ReadFile)
		if wholeErr != nil {
			var got, want diag.List
			errors.As(err, &got)
			errors.As(wholeErr, &want)
			for _, d := range got {
				if !slices.ContainsFunc(want, func(w diag.Diagnostic) bool { return cmp.Equal(w, d) }) {
					t.Errorf("%s: the shard reports %s, which the whole compile does not", e.Name(), d)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: the shard refused what the whole compile accepts: %v", e.Name(), err)
			continue
		}
		if shard.Version() != whole.Version() {
			t.Errorf("%s: the shard's fleet is version %s, the whole compile's %s", e.Name(), shard.Version(), whole.Version())
		}
		// A shard of one group serves it what the whole compile does.
		for _, g := range whole.Groups() {
			one, err := (&Cache{Groups: fleet.Selector{g.Name}}).Compile(reg, files, os.ReadFile)
			if err != nil {
				t.Errorf("%s: the shard of group %s refused what the whole compile accepts: %v", e.Name(), g.Name, err)
				continue
			}
			if got, _ := one.Lookup(g.Name); got.Snapshot.Version() != g.Snapshot.Version() {
				t.Errorf("%s: the shard of group %s serves it version %s, the whole compile %s", e.Name(), g.Name, got.Snapshot.Version(), g.Snapshot.Version())
			}
		}
	}
}

// Over a config whose groups reach their resources every way one names
// another (testdata/compile/shard_reach.yaml), the shard of each group
// translates the services of its group's snapshot and no other, and reads
// only the secret files its group reaches.
func TestShardOfEachGroupTranslatesOnlyItsShare(t *testing.T) {
	dir := filepath.Join("testdata", "compile")
	data, err := os.ReadFile(filepath.Join(dir, "shard_reach.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := []config.File{{Path: filepath.Join(dir, "shard_reach.yaml"), Data: data, Dir: dir}}
	reg := xdstype.New()
	whole, err := Compile(reg, files, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	wantRead := map[string][]string{"mesh": {"certs/ca.crt", "certs/edge.crt", "certs/edge.key"}}
	for _, g := range whole.Groups() {
		c := &Cache{Groups: fleet.Selector{g.Name}}
		reader := &countingReader{}
		if _, err := c.Compile(reg, files, reader.Read); err != nil {
			t.Fatalf("the shard of %s: %v", g.Name, err)
		}
		if got, want := translatedServices(c), g.Snapshot.Set(xdstype.ClusterURL).Names(); !slices.Equal(got, want) {
			t.Errorf("the shard of %s translated the services %v; its group's clusters are %v", g.Name, got, want)
		}
		var read []string
		for _, p := range reader.read {
			read = append(read, strings.TrimPrefix(p, dir+"/"))
		}
		slices.Sort(read)
		if !slices.Equal(read, wantRead[g.Name]) {
			t.Errorf("the shard of %s read %v, want %v", g.Name, read, wantRead[g.Name])
		}
	}
}

// A shard's whole-config check (Cache.Whole, a store's writes) keeps
// nothing of the fleet past which resources passed: not the
// translations, which only the shard's own compiles keep for its groups.
func TestShardsWholeCheckKeepsNoTranslations(t *testing.T) {
	c := &Cache{Groups: fleet.Selector{"a"}}
	reg := xdstype.New()
	if _, err := c.Compile(reg, shardFiles(shardConfig), os.ReadFile); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Whole().Compile(reg, shardFiles(shardConfig), os.ReadFile); err != nil {
		t.Fatal(err)
	}
	if got := translatedServices(c.Whole()); len(got) > 0 {
		t.Errorf("the whole-config check kept the translations of %v", got)
	}
	if got := translatedServices(c); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("the shard's cache holds the translations of %v, want a1's alone", got)
	}
}

// A shard whose --groups takes none of the config's groups (a typo) is
// warned of: it builds and checks nothing, and would refuse every node
// without a word.
func TestShardServingNoGroupOfTheConfigIsWarned(t *testing.T) {
	c := &Cache{Groups: fleet.Selector{"typo"}}
	_, warnings, err := c.CompileWithWarnings(xdstype.New(), shardFiles(shardConfig), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, "--groups typo serves none of the config's") {
		t.Errorf("warnings %v, want one saying --groups typo serves none of the config's groups", warnings)
	}
	c = &Cache{Groups: fleet.Selector{"a"}}
	if _, warnings, err = c.CompileWithWarnings(xdstype.New(), shardFiles(shardConfig), os.ReadFile); err != nil || len(warnings) != 0 {
		t.Errorf("a shard serving group a: warnings %v, err %v; want none", warnings, err)
	}
}
