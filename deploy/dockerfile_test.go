package deploy_test

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dockerfile is the image's build file, at the repository's root.
const dockerfile = "../Dockerfile"

// instruction is one Dockerfile instruction: its keyword (upper case), its
// arguments as written, and its line.
type instruction struct {
	cmd, args string
	line      int
}

// stage is a FROM and what follows it.
type stage struct {
	from, name string
	line       int
	ins        []instruction
}

// parseDockerfile reads the instructions of a Dockerfile by stage: comments
// and blank lines skipped, backslash continuations joined.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start, n := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			s := stage{from: fields[0], line: start}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before any FROM", path, start, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// last returns the stage's last instruction of cmd, or nil.
func (s stage) last(cmd string) *instruction {
	for i := len(s.ins) - 1; i >= 0; i-- {
		if s.ins[i].cmd == cmd {
			return &s.ins[i]
		}
	}
	return nil
}

// execForm decodes an instruction written in exec (JSON) form.
func execForm(t *testing.T, in *instruction) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
		t.Fatalf("%s:%d: %s %s: want the exec form, a JSON array (no shell in the image): %v", dockerfile, in.line, in.cmd, in.args, err)
	}
	return argv
}

var goBuildLine = regexp.MustCompile(`^((?:[A-Z_]+=\S+ )*)go build (.*)$`)

// TestDockerfile checks the image's build file: a builder stage whose go
// build makes a static binary of ./cmd/pylon (run here, on this tree), a
// final stage on a distroless base that runs as a non-root user, and a
// command whose every flag pylon serve has, run against the binary built.
// The image itself is not built: that needs a container engine.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	if len(stages) < 2 {
		t.Fatalf("%s: %d stage(s): want a builder and a final stage", dockerfile, len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	checkBuilderGo(t, build)

	var run *instruction
	for i := range build.ins {
		if build.ins[i].cmd == "RUN" && goBuildLine.MatchString(build.ins[i].args) {
			run = &build.ins[i]
		}
	}
	if run == nil {
		t.Fatalf("%s: the builder stage %q has no RUN ... go build", dockerfile, build.name)
	}
	bin, out := runGoBuild(t, run)

	// The final stage: distroless, non-root, running the binary built.
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") {
		t.Errorf("%s:%d: final stage FROM %s: want gcr.io/distroless/static-* (no shell, no libc)", dockerfile, final.line, final.from)
	}
	user := final.last("USER")
	if user == nil {
		t.Fatalf("%s: the final stage sets no USER: it would run as whatever the base says", dockerfile)
	}
	if u, _, _ := strings.Cut(user.args, ":"); u == "0" || u == "root" || u == "" {
		t.Errorf("%s:%d: USER %s: want a non-root user", dockerfile, user.line, user.args)
	}
	copied := ""
	for _, in := range final.ins {
		if f := strings.Fields(in.args); in.cmd == "COPY" && len(f) >= 3 && f[0] == "--from="+build.name && f[len(f)-2] == out {
			copied = f[len(f)-1]
		}
	}
	if copied == "" {
		t.Errorf("%s: the final stage does not COPY --from=%s %s (the go build's output)", dockerfile, build.name, out)
	}
	if v := final.last("VOLUME"); v == nil || !strings.Contains(v.args, "/var/lib/pylon") {
		t.Errorf("%s: the final stage declares no VOLUME for the data folder /var/lib/pylon", dockerfile)
	}
	entry, cmd := final.last("ENTRYPOINT"), final.last("CMD")
	if entry == nil || cmd == nil {
		t.Fatalf("%s: the final stage needs ENTRYPOINT and CMD", dockerfile)
	}
	argv := append(execForm(t, entry), execForm(t, cmd)...)
	if len(argv) < 2 || argv[0] != copied || argv[1] != "serve" {
		t.Fatalf("%s:%d: ENTRYPOINT %v: want [%q, \"serve\"]", dockerfile, entry.line, argv, copied)
	}
	checkServeArgs(t, dockerfile+" ENTRYPOINT and CMD", argv[2:], serveFlags(t))
	// The binary the builder made takes the image's command too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(ctx, bin, append(argv[1:], "--help")...).CombinedOutput(); err != nil {
		t.Errorf("%s %s --help: %v\n%s", bin, strings.Join(argv[1:], " "), err, b)
	}
}

// checkBuilderGo checks that the builder's Go is at least go.mod's.
func checkBuilderGo(t *testing.T, build stage) {
	t.Helper()
	m := regexp.MustCompile(`^golang:(\d+\.\d+(?:\.\d+)?)\b`).FindStringSubmatch(build.from)
	if m == nil {
		t.Fatalf("%s:%d: builder FROM %s: want golang:VERSION-...", dockerfile, build.line, build.from)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if want == nil {
		t.Fatal("go.mod has no go line")
	}
	if olderGo(m[1], string(want[1])) {
		t.Errorf("%s:%d: builder Go %s is older than go.mod's go %s", dockerfile, build.line, m[1], want[1])
	}
}

// runGoBuild runs the builder's go build command on this tree, as written
// but for its output, written to a temporary folder, and checks that it
// builds ./cmd/pylon with -trimpath and without cgo into a static binary.
// It returns the binary and the output path the Dockerfile gave.
func runGoBuild(t *testing.T, run *instruction) (bin, out string) {
	t.Helper()
	m := goBuildLine.FindStringSubmatch(run.args)
	env, args := strings.Fields(m[1]), strings.Fields(m[2])
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("%s:%d: %s: want CGO_ENABLED=0 (a static binary)", dockerfile, run.line, run.args)
	}
	if !slices.Contains(args, "-trimpath") || args[len(args)-1] != "./cmd/pylon" {
		t.Errorf("%s:%d: %s: want -trimpath and ./cmd/pylon last", dockerfile, run.line, run.args)
	}
	bin = filepath.Join(t.TempDir(), "pylon")
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			out, args[i+1] = args[i+1], bin
		}
	}
	if out == "" {
		t.Fatalf("%s:%d: %s: no -o", dockerfile, run.line, run.args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = ".." // the Dockerfile's WORKDIR holds the whole tree
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s:%d: %s: %v\n%s", dockerfile, run.line, run.args, err, b)
	}
	checkStatic(t, bin)
	return bin, out
}

// checkStatic fails unless bin is an ELF file with no interpreter and no
// shared libraries: it runs on an image without libc.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: dynamically linked", bin)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s links shared libraries %v (%v): want none", bin, libs, err)
	}
}

// olderGo says whether Go version a (1.26, 1.26.8) is older than b.
func olderGo(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
