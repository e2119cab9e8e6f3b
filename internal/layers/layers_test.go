// Package layers holds no code, only the test that keeps Pylon's packages in
// their layers: every import of every Go file in the module is checked
// against the tables of rules_test.go, and a new import the tables do not
// allow fails with the file, the line, the import and the rule it breaks.
// docs/architecture.md explains the layers; rules_test.go is their authority.
//
// The files are read with go/parser, import blocks only, rather than through
// `go list`: it starts no process, takes a few milliseconds, sees the files
// of every platform (not only those of this build's GOOS and tags) and gives
// the line of each import.
package layers

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module's root, from this package's folder.
const root = "../.."

// imp is one import of one Go file.
type imp struct {
	file string // slash-separated, relative to the module's root
	line int
	path string // as imported, relative to the module when it is Pylon's
	own  bool   // one of the module's packages
	test bool   // in a _test.go file
}

// pkg is one folder of Go files.
type pkg struct {
	imports []imp
	code    bool // has Go files that are not tests
}

// tree is the module's packages by path relative to the module's root
// ("internal/xds"; "." for the root itself).
type tree map[string]*pkg

// readTree reads the import blocks of every Go file under dir, the root of
// the module named in its go.mod. Folders Go ignores (testdata, names
// starting with "." or "_") and nested modules are skipped.
func readTree(dir string) (tree, error) {
	module, err := moduleOf(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	t := tree{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return skipDir(path, rel, d.Name())
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		return t.addFile(fset, module, path, rel)
	})
	return t, err
}

// skipDir says whether the go tool would leave a folder out of the module's
// packages.
func skipDir(path, rel, name string) error {
	if rel == "." {
		return nil
	}
	if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

// addFile records the imports of one Go file.
func (t tree) addFile(fset *token.FileSet, module, path, rel string) error {
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
	if err != nil {
		return err
	}
	dir := filepath.ToSlash(filepath.Dir(rel))
	p := t[dir]
	if p == nil {
		p = &pkg{}
		t[dir] = p
	}
	test := strings.HasSuffix(rel, "_test.go")
	p.code = p.code || !test
	for _, s := range f.Imports {
		ip, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			return fmt.Errorf("%s: %v", rel, err)
		}
		own := ip == module || strings.HasPrefix(ip, module+"/")
		if own {
			ip = strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
		}
		p.imports = append(p.imports, imp{
			file: rel, line: fset.Position(s.Pos()).Line, path: ip, own: own, test: test,
		})
	}
	return nil
}

// moduleOf reads the module path of a go.mod file.
func moduleOf(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// match says whether a package path matches a pattern: the path itself, or,
// for "a/b/...", a/b and every package under it.
func match(pattern, path string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == dir || strings.HasPrefix(path, dir+"/")
	}
	return path == pattern
}

// matchAny says whether path matches one of the patterns.
func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// check returns every breach of the rules r in the tree t, sorted, each a
// sentence naming the file and line (or the table line) and the rule.
func check(t tree, r rules) []string {
	c := checker{t: t, r: r}
	c.tables()
	for _, path := range slices.Sorted(maps.Keys(t)) {
		for _, im := range t[path].imports {
			c.imp(path, im)
		}
	}
	c.paidDebts()
	slices.Sort(c.out)
	return c.out
}

// checker gathers the breaches of one check.
type checker struct {
	t    tree
	r    rules
	used map[edge]bool // debts the tree still has
	out  []string
}

func (c *checker) fail(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

// tables checks the rules against themselves and the tree: every package with
// code has a layer, every table line names packages that exist, and every
// allowed import points to a lower layer (only a debt may point up).
func (c *checker) tables() {
	for path, p := range c.t {
		if _, ok := c.r.layer[path]; p.code && !ok {
			c.fail("%s: no line in layer (rules_test.go): give the package a layer, and its imports lines in allowed", path)
		}
	}
	for path := range c.r.layer {
		if p := c.t[path]; p == nil || !p.code {
			c.fail("layer: %s has no Go code (not a test) in the module: delete its line", path)
		}
	}
	for _, e := range c.r.allowed {
		c.edgeExists("allowed", e)
		for to := range c.r.layer {
			if match(e.to, to) && c.r.layer[to] >= c.r.layer[e.from] {
				c.fail("allowed: %s -> %s: %s is in layer %q, not below %s's layer %q: an allowance never points up or sideways (move the code instead)",
					e.from, to, to, c.r.name(to), e.from, c.r.name(e.from))
			}
		}
	}
	for _, e := range c.r.allowed {
		for _, b := range c.r.bans {
			if b.pkg == e.from && (match(b.path, e.to) || match(e.to, b.path)) {
				c.fail("allowed: %s -> %s contradicts bans (%s): delete it", e.from, e.to, b.why)
			}
		}
	}
	for _, d := range c.r.debts {
		c.edgeExists("debts", d.edge)
		if d.step == "" {
			c.fail("debts: %s -> %s names no step that removes it", d.from, d.to)
		}
	}
}

// edgeExists checks that a table line names a package with a layer and a
// pattern matching at least one.
func (c *checker) edgeExists(table string, e edge) {
	if _, ok := c.r.layer[e.from]; !ok {
		c.fail("%s: %s -> %s: %s has no layer", table, e.from, e.to, e.from)
	}
	for to := range c.r.layer {
		if match(e.to, to) {
			return
		}
	}
	c.fail("%s: %s -> %s: no package with a layer matches %s", table, e.from, e.to, e.to)
}

// imp checks one import of the package at path.
func (c *checker) imp(path string, im imp) {
	at := fmt.Sprintf("%s:%d", im.file, im.line)
	switch {
	case im.test && im.own:
		if im.path != path && matchAny(c.r.testsMayNotImport, im.path) {
			c.fail("%s: a test of %s imports %s: tests import no program and no end-to-end suite (testsMayNotImport)", at, path, im.path)
		}
	case im.test:
	case !im.own:
		c.external(path, at, im)
	default:
		c.own(path, at, im)
	}
}

// own checks an import of one of the module's packages by code that is not
// a test: a debt passes, then a ban fails, then allowed decides.
func (c *checker) own(path, at string, im imp) {
	if matchAny(c.r.testHelpers, im.path) && !matchAny(c.r.testHelpers, path) {
		c.fail("%s: %s imports the test helper %s: code that is not a test never does (testHelpers)", at, path, im.path)
		return
	}
	for _, d := range c.r.debts {
		if d.from == path && match(d.to, im.path) {
			if c.used == nil {
				c.used = map[edge]bool{}
			}
			c.used[d.edge] = true
			return
		}
	}
	if c.banned(path, at, im) {
		return
	}
	for _, e := range c.r.allowed {
		if e.from == path && match(e.to, im.path) {
			return
		}
	}
	to, ok := c.r.layer[im.path]
	if from, known := c.r.layer[path]; ok && known && to >= from {
		c.fail("%s: %s (layer %q) imports %s (layer %q): against the layers, which no line in allowed may permit; move the code (docs/architecture.md)",
			at, path, c.r.name(path), im.path, c.r.name(im.path))
		return
	}
	c.fail("%s: %s (layer %q) imports %s (layer %q): not in allowed for %s (rules_test.go); add the line if the package's one job needs it",
		at, path, c.r.name(path), im.path, c.r.name(im.path), path)
}

// banned fails an import that bans forbids, and says so.
func (c *checker) banned(path, at string, im imp) bool {
	for _, b := range c.r.bans {
		if b.pkg == path && match(b.path, im.path) {
			c.fail("%s: %s imports %s (bans: %s)", at, path, im.path, b.why)
			return true
		}
	}
	return false
}

// external checks an import from outside the module by code that is not a
// test.
func (c *checker) external(path, at string, im imp) {
	if im.path == "testing" && !matchAny(c.r.testHelpers, path) {
		c.fail("%s: %s imports testing outside its tests: only testHelpers do", at, path)
	}
	for _, o := range c.r.owners {
		if match(o.module, im.path) && !slices.Contains(o.pkgs, path) {
			c.fail("%s: %s imports %s: only %s may (owners: %s)", at, path, im.path, strings.Join(o.pkgs, ", "), o.why)
		}
	}
	c.banned(path, at, im)
}

// paidDebts fails on a debt the code no longer has, so the table tightens as
// the debts are paid.
func (c *checker) paidDebts() {
	for _, d := range c.r.debts {
		if !c.used[d.edge] {
			c.fail("debts: %s -> %s is paid (no code imports it any more): delete its line", d.from, d.to)
		}
	}
}

// name is the name of a package's layer, or "none".
func (r rules) name(path string) string {
	l, ok := r.layer[path]
	if !ok || l < 0 || l >= len(r.layerNames) {
		return "none"
	}
	return r.layerNames[l]
}

// TestImportRules checks the module's imports against rules_test.go.
func TestImportRules(t *testing.T) {
	tr, err := readTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) < 40 {
		t.Fatalf("read %d packages from %s: the walk missed the module", len(tr), root)
	}
	for _, msg := range check(tr, pylon) {
		t.Error(msg)
	}
}
