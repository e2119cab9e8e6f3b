package deploy_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerignore is the image build's ignore file, at the repository's root.
const dockerignore = "../.dockerignore"

// ignoreRule is one .dockerignore line: its pattern as a regular
// expression over slash-separated paths from the context's root, and
// whether it is an exception ("!").
type ignoreRule struct {
	re      *regexp.Regexp
	pattern string
	keep    bool
}

// parseDockerignore reads .dockerignore as Docker's builder does: comments
// and blank lines skipped, each pattern cleaned and rooted at the context
// (a leading "/" means the same), "**" any number of folders, "*" and "?"
// within one path element.
func parseDockerignore(t *testing.T, path string) []ignoreRule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []ignoreRule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{pattern: line}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.keep, line = true, rest
		}
		line = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		r.re = regexp.MustCompile("^" + re.String() + "$")
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rules
}

// ignored reports whether the build context leaves out path (slash
// separated, from the root): the last rule matching it or a folder above
// it decides, as in Docker's pattern matcher.
func ignored(rules []ignoreRule, path string) bool {
	out := false
	for _, r := range rules {
		for p := path; p != "." && p != ""; p = filepathDir(p) {
			if r.re.MatchString(p) {
				out = !r.keep
				break
			}
		}
	}
	return out
}

func filepathDir(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return ""
}

// TestDockerignoreLeavesOutKeysAndTokens checks that a CA's folder, a key,
// a token or an encryption key file made as the docs show, in the
// repository's root or below, is not copied into the image's builder
// stage (COPY . .), and that what the build needs still is.
func TestDockerignoreLeavesOutKeysAndTokens(t *testing.T) {
	rules := parseDockerignore(t, dockerignore)
	secret := []string{
		"pki/ca-key.pem", "pki/edge-1-key.pem", "edge-1-key.pem", "ca.pem",
		"deploy/etcd-root-key.pem", "admin-token", "read-token", "pylon.key",
		"pylon-data/admin-token",
	}
	// Every folder `pylon certs` is told to use in the docs, and every
	// file they redirect a token or key into.
	docs, _ := filepath.Glob("../docs/*.md")
	for _, d := range append(docs, "../README.md") {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`pylon certs \w+ .*--dir (\S+)`).FindAllStringSubmatch(string(b), -1) {
			secret = append(secret, m[1]+"/ca-key.pem", m[1]+"/notes.txt")
		}
		for _, m := range regexp.MustCompile(`(?m)> (\S*(token|\.key))\)?$`).FindAllStringSubmatch(string(b), -1) {
			secret = append(secret, strings.TrimSuffix(m[1], ")"))
		}
	}
	slices.Sort(secret)
	for _, p := range slices.Compact(secret) {
		if !ignored(rules, p) {
			t.Errorf(".dockerignore: %s would be copied into the image build", p)
		}
	}
	needed := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
		if d.IsDir() && (rel == ".git" || ignored(rules, rel)) {
			return fs.SkipDir
		}
		if strings.HasSuffix(rel, ".go") || rel == "go.mod" || rel == "go.sum" {
			needed++
			if ignored(rules, rel) {
				t.Errorf(".dockerignore leaves out %s, which the build needs", rel)
			}
		}
		return nil
	})
	if err != nil || needed == 0 {
		t.Fatalf("walking the repository: %v (%d files the build needs)", err, needed)
	}
	for _, p := range []string{"go.mod", "cmd/pylon/main.go", "examples/quickstart.yaml", "internal/ui/static"} {
		if ignored(rules, p) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", p)
		}
	}
}
