package layers

import (
	"slices"
	"strings"
	"testing"
)

// synth builds a tree from files ("a/mid/mid.go") and their imports; an
// import under "m/" is the module's own, the others are outside it. The
// i-th import of a file is on line 4+i.
func synth(files map[string][]string) tree {
	t := tree{}
	for file, imports := range files {
		dir := file[:strings.LastIndex(file, "/")]
		p := t[dir]
		if p == nil {
			p = &pkg{}
			t[dir] = p
		}
		test := strings.HasSuffix(file, "_test.go")
		p.code = p.code || !test
		for i, path := range imports {
			rel, own := strings.CutPrefix(path, "m/")
			p.imports = append(p.imports, imp{file: file, line: 4 + i, path: rel, own: own, test: test})
		}
	}
	return t
}

// tiny is a small set of rules over the packages of baseTree.
func tiny() rules {
	return rules{
		layerNames: []string{"low", "mid", "high", "main"},
		layer:      map[string]int{"a/leaf": 0, "a/mid": 1, "a/helper": 1, "a/top": 2, "cmd/x": 3},
		allowed: []edge{
			{"a/mid", "a/leaf"},
			{"a/helper", "a/leaf"},
			{"a/top", "a/mid"},
			{"cmd/x", "a/..."},
		},
		debts:             []debt{{edge{"a/leaf", "a/mid"}, "step 9", "an old shortcut"}},
		testHelpers:       []string{"a/helper"},
		testsMayNotImport: []string{"cmd/..."},
		owners:            []owner{{"example.com/db/...", []string{"a/mid"}, "the database is mid's"}},
		bans: []ban{
			{"a/leaf", "os/...", "the leaf does no I/O"},
			{"a/leaf", "a/mid", "the leaf stays a leaf"},
			{"a/top", "a/leaf", "top goes through mid"},
		},
	}
}

// baseTree is a tree that keeps tiny's rules.
func baseTree() map[string][]string {
	return map[string][]string{
		"a/leaf/leaf.go":      {"fmt", "m/a/mid"},
		"a/leaf/leaf_test.go": {"testing", "m/a/helper", "m/a/top"},
		"a/mid/mid.go":        {"m/a/leaf", "example.com/db/sql"},
		"a/helper/helper.go":  {"testing", "m/a/leaf"},
		"a/top/top.go":        {"m/a/mid"},
		"cmd/x/main.go":       {"m/a/top", "m/a/leaf"},
		"e2e/e2e_test.go":     {"m/a/top", "m/a/helper"},
	}
}

// TestCheckerCatchesBreaks shows that each rule fails a tree that breaks it,
// with a message naming the file, the line, the import and the rule.
func TestCheckerCatchesBreaks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files func(map[string][]string)
		rules func(*rules)
		want  string
	}{
		{name: "clean"},
		{
			name:  "import against the layers",
			files: func(f map[string][]string) { f["a/mid/mid.go"] = append(f["a/mid/mid.go"], "m/a/top") },
			want:  `a/mid/mid.go:6: a/mid (layer "mid") imports a/top (layer "high"): against the layers`,
		},
		{
			name:  "import down the layers but not allowed",
			files: func(f map[string][]string) { f["a/top/top.go"] = append(f["a/top/top.go"], "m/a/leaf") },
			rules: func(r *rules) { r.bans = r.bans[:2] },
			want:  `a/top/top.go:5: a/top (layer "high") imports a/leaf (layer "low"): not in allowed for a/top (rules_test.go)`,
		},
		{
			name:  "import of the module's own package banned",
			files: func(f map[string][]string) { f["a/top/top.go"] = append(f["a/top/top.go"], "m/a/leaf") },
			want:  "a/top/top.go:5: a/top imports a/leaf (bans: top goes through mid)",
		},
		{
			name:  "allowance contradicting a ban",
			rules: func(r *rules) { r.allowed = append(r.allowed, edge{"a/top", "a/leaf"}) },
			want:  "allowed: a/top -> a/leaf contradicts bans (top goes through mid): delete it",
		},
		{
			name:  "paid debt",
			files: func(f map[string][]string) { f["a/leaf/leaf.go"] = []string{"fmt"} },
			want:  "debts: a/leaf -> a/mid is paid (no code imports it any more): delete its line",
		},
		{
			name:  "ban on an import once its debt is gone",
			rules: func(r *rules) { r.debts = nil },
			want:  "a/leaf/leaf.go:5: a/leaf imports a/mid (bans: the leaf stays a leaf)",
		},
		{
			name:  "debt without a step",
			rules: func(r *rules) { r.debts[0].step = "" },
			want:  "debts: a/leaf -> a/mid names no step that removes it",
		},
		{
			name:  "package without a layer",
			files: func(f map[string][]string) { f["a/new/new.go"] = []string{"fmt"} },
			want:  "a/new: no line in layer (rules_test.go)",
		},
		{
			name:  "test-only package needs no layer",
			files: func(f map[string][]string) { f["a/more/more_test.go"] = []string{"m/a/top"} },
		},
		{
			name:  "layer line for a package that is gone",
			rules: func(r *rules) { r.layer["a/gone"] = 0 },
			want:  "layer: a/gone has no Go code (not a test) in the module: delete its line",
		},
		{
			name:  "allowance against the layers",
			rules: func(r *rules) { r.allowed = append(r.allowed, edge{"a/leaf", "a/top"}) },
			want:  `allowed: a/leaf -> a/top: a/top is in layer "high", not below a/leaf's layer "low"`,
		},
		{
			name:  "allowance by a pattern that reaches its own layer",
			rules: func(r *rules) { r.allowed = append(r.allowed, edge{"cmd/x", "cmd/..."}) },
			want:  `allowed: cmd/x -> cmd/x: cmd/x is in layer "main", not below cmd/x's layer "main"`,
		},
		{
			name:  "allowance naming no package",
			rules: func(r *rules) { r.allowed = append(r.allowed, edge{"a/top", "a/nothing"}) },
			want:  "allowed: a/top -> a/nothing: no package with a layer matches a/nothing",
		},
		{
			name:  "test importing a program",
			files: func(f map[string][]string) { f["a/top/top_test.go"] = []string{"testing", "m/cmd/x"} },
			want:  "a/top/top_test.go:5: a test of a/top imports cmd/x: tests import no program and no end-to-end suite (testsMayNotImport)",
		},
		{
			name:  "code importing a test helper",
			rules: func(r *rules) { r.allowed = append(r.allowed, edge{"a/top", "a/helper"}) },
			files: func(f map[string][]string) { f["a/top/top.go"] = append(f["a/top/top.go"], "m/a/helper") },
			want:  "a/top/top.go:5: a/top imports the test helper a/helper: code that is not a test never does (testHelpers)",
		},
		{
			name:  "code importing testing",
			files: func(f map[string][]string) { f["a/mid/mid.go"] = append(f["a/mid/mid.go"], "testing") },
			want:  "a/mid/mid.go:6: a/mid imports testing outside its tests: only testHelpers do",
		},
		{
			name:  "module with an owner",
			files: func(f map[string][]string) { f["a/top/top.go"] = append(f["a/top/top.go"], "example.com/db") },
			want:  "a/top/top.go:5: a/top imports example.com/db: only a/mid may (owners: the database is mid's)",
		},
		{
			name:  "banned package",
			files: func(f map[string][]string) { f["a/leaf/leaf.go"] = append(f["a/leaf/leaf.go"], "os/exec") },
			want:  "a/leaf/leaf.go:6: a/leaf imports os/exec (bans: the leaf does no I/O)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, r := baseTree(), tiny()
			if tc.files != nil {
				tc.files(files)
			}
			if tc.rules != nil {
				tc.rules(&r)
			}
			got := check(synth(files), r)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("check found breaches in a tree that keeps the rules:\n%s", strings.Join(got, "\n"))
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("check found:\n%s\nwant exactly one breach, starting %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

// TestImportRulesCatchANewImport adds imports to the real tree that Pylon's
// rules forbid, one per rule of docs/architecture.md, and checks that each is
// named: the rules fail on a new break, not only on a synthetic tree.
func TestImportRulesCatchANewImport(t *testing.T) {
	tr, err := readTree(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"internal/status", "internal/xds", `internal/status/new.go:1: internal/status (layer "base") imports internal/xds (layer "engine"): against the layers`},
		{"internal/model", "internal/config", `internal/model/new.go:1: internal/model (layer "base") imports internal/config (layer "content"): against the layers`},
		{"internal/xds", "internal/store", "internal/xds/new.go:1: internal/xds imports internal/store (bans: the xDS server never sees the store)"},
		{"internal/translate", "internal/redact", `internal/translate/new.go:1: internal/translate (layer "content") imports internal/redact (layer "leaf"): not in allowed for internal/translate`},
		{"internal/translate", "internal/snapshot", `internal/translate/new.go:1: internal/translate (layer "content") imports internal/snapshot (layer "content"): against the layers`},
		{"internal/snapshot", "internal/xds", `internal/snapshot/new.go:1: internal/snapshot (layer "content") imports internal/xds (layer "engine"): against the layers`},
		{"internal/model", "google.golang.org/protobuf/proto", "internal/model/new.go:1: internal/model imports google.golang.org/protobuf/proto (bans: the model holds no Envoy types)"},
		{"internal/xds", "go.etcd.io/bbolt", "internal/xds/new.go:1: internal/xds imports go.etcd.io/bbolt: only internal/store/bolt"},
	} {
		t.Run(tc.from+"->"+tc.to, func(t *testing.T) {
			p := tr[tc.from]
			saved := p.imports
			defer func() { p.imports = saved }()
			own := strings.HasPrefix(tc.to, "internal/")
			p.imports = append(slices.Clip(saved), imp{file: tc.from + "/new.go", line: 1, path: tc.to, own: own})
			got := check(tr, pylon)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("check found:\n%s\nwant exactly one breach, starting %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}
