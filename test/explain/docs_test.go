package explain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// docStep is a marked fenced block of docs/route-tests.md: the marker
// comment's words and the block's body.
type docStep struct {
	marker []string
	body   string
	line   int
}

var markerRE = regexp.MustCompile(`^<!-- test: (.*) -->$`)

// docSteps reads the blocks that follow a `<!-- test: ... -->` comment.
func docSteps(t *testing.T, path string) []docStep {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []docStep
	for i := 0; i < len(lines); i++ {
		m := markerRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s:%d: a test marker not followed by a fenced block", path, i+1)
		}
		start := i + 2
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: unterminated block", path, i+2)
		}
		out = append(out, docStep{marker: strings.Fields(m[1]), body: strings.Join(lines[start:end], "\n") + "\n", line: i + 1})
		i = end
	}
	return out
}

// TestRouteTestsDoc runs docs/route-tests.md as written: each config block
// is written to its file, each command is run by the CLI in that folder and
// its output compared with the output block after it, and a change block
// (a top-level key replaced in a config) must be refused by `pylon
// validate` with the diagnostics the refused block shows.
func TestRouteTestsDoc(t *testing.T) {
	doc, err := filepath.Abs("../../docs/route-tests.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := docSteps(t, doc)
	t.Chdir(t.TempDir())
	var lastOut, changed string
	ran := 0
	for i, s := range steps {
		switch s.marker[0] {
		case "config":
			writeFile(t, s.marker[1], s.body)
		case "run":
			lastOut = runDocCommand(t, s)
			ran++
		case "output":
			if i == 0 || steps[i-1].marker[0] != "run" {
				t.Fatalf("route-tests.md:%d: an output block not after a command", s.line)
			}
			if lastOut != s.body {
				t.Errorf("route-tests.md:%d: the command printed\n%s\nthe doc shows\n%s", s.line, lastOut, s.body)
			}
		case "change":
			base, err := os.ReadFile(s.marker[1])
			if err != nil {
				t.Fatal(err)
			}
			changed = s.marker[1]
			writeFile(t, changed, replaceTopKeys(t, string(base), s.body))
		case "refused":
			checkRefused(t, changed, s)
		default:
			t.Fatalf("route-tests.md:%d: unknown marker %v", s.line, s.marker)
		}
	}
	if ran < 4 || changed == "" {
		t.Fatalf("the doc's examples were not all found: %d commands, change %q", ran, changed)
	}
}

// runDocCommand runs the block's `pylon ...` line with the CLI in process.
func runDocCommand(t *testing.T, s docStep) string {
	t.Helper()
	args := shellWords(t, strings.TrimSpace(s.body))
	if len(args) == 0 || args[0] != "pylon" {
		t.Fatalf("route-tests.md:%d: not a pylon command: %q", s.line, s.body)
	}
	var out, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), args[1:], &out, &stderr); code != 0 {
		t.Fatalf("route-tests.md:%d: %v: exit %d: %s", s.line, args, code, stderr.String())
	}
	return out.String()
}

// checkRefused validates the changed config and checks that every line of
// the block, after its "file:line: ", is in the refusal.
func checkRefused(t *testing.T, path string, s docStep) {
	t.Helper()
	var out, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"validate", path}, &out, &stderr); code != 1 {
		t.Fatalf("route-tests.md:%d: the changed config was accepted:\n%s", s.line, out.String())
	}
	loc := regexp.MustCompile(`^\S+:\d+: `)
	for _, l := range strings.Split(strings.TrimSpace(s.body), "\n") {
		if want := loc.ReplaceAllString(l, ""); !strings.Contains(stderr.String(), want) {
			t.Errorf("route-tests.md:%d: the refusal\n%s\ndoes not say\n%s", s.line, stderr.String(), want)
		}
	}
}

// replaceTopKeys replaces, in a YAML document, the sections of the
// top-level keys the change holds with the change's.
func replaceTopKeys(t *testing.T, base, change string) string {
	t.Helper()
	top := regexp.MustCompile(`(?m)^([a-z_]+):`)
	for _, m := range top.FindAllStringSubmatch(change, -1) {
		start := strings.Index(base, "\n"+m[1]+":")
		if start < 0 {
			t.Fatalf("the change's key %s is not in the config", m[1])
		}
		start++
		end := len(base)
		if next := top.FindStringIndex(base[start+len(m[0]):]); next != nil {
			end = start + len(m[0]) + next[0]
		}
		section := extract(change, m[1])
		base = base[:start] + section + base[end:]
	}
	return base
}

// extract is a top-level key's section of a YAML document.
func extract(doc, key string) string {
	top := regexp.MustCompile(`(?m)^[a-z_]+:`)
	start := strings.Index(doc, key+":")
	rest := doc[start+len(key)+1:]
	if next := top.FindStringIndex(rest); next != nil {
		return doc[start : start+len(key)+1+next[0]]
	}
	return doc[start:]
}

// shellWords splits a command line as sh would for the doc's commands:
// words, and single-quoted strings.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '"' || r == '\\' || r == '$' || r == '|' || r == '>' || r == '<':
			t.Fatalf("the doc's command %q uses %q, which this test does not interpret", s, r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConfigDocTestsSchema: the `tests:` example of docs/config.md decodes
// strictly (every field it shows exists), with the fields it shows set.
func TestConfigDocTestsSchema(t *testing.T) {
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "```yaml\ntests:\n")
	if start < 0 {
		t.Fatal("docs/config.md has no tests: example")
	}
	block := text[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	doc, err := config.Load(xdstype.New(), []config.File{{Path: "config.md", Data: []byte(block)}})
	if err != nil {
		t.Fatalf("the example does not decode: %v", err)
	}
	tc := doc.Tests[0]
	if tc.Node.ID != "edge-1" || tc.Request.Port != 8080 || tc.Request.Headers["x-canary"] != "1" || tc.Expect.Route != "#0" || tc.Expect.FilterChain != "#0" || tc.Expect.Cluster != "cart-canary" {
		t.Errorf("decoded: %+v", tc)
	}
	uncommented := regexp.MustCompile(`(?m)^(\s+)# (\w+: )`).ReplaceAllString(block, "$1$2")
	all, err := config.Load(xdstype.New(), []config.File{{Path: "config.md", Data: []byte(uncommented)}})
	if err != nil {
		t.Fatalf("the commented fields do not decode: %v", err)
	}
	e := all.Tests[0].Expect
	if all.Tests[0].Request.Listener != "http" || e.Redirect == "" || e.Status != 404 || e.GRPCStatus != "UNAVAILABLE" || !e.Unreachable || e.Clusters["cart"] != 95 {
		t.Errorf("the commented fields: %+v", all.Tests[0])
	}
}
