package readme

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// docSkippedFiles are the files under docs/ whose commands are not run,
// each with why.
var docSkippedFiles = map[string]string{
	"benchmarks-log.md": "dated lab notes: each command as it was run that day, against the code of that day; " +
		"BENCHMARKS.md holds the current ones, checked here",
}

// docSkipped are the docs' commands this test cannot run, per file, each
// with why. Every entry must still be in its file.
var docSkipped = map[string]map[string]string{
	"operations-alerts.md": {
		`grpcurl -plaintext -import-path envoy-api -import-path xds -import-path protoc-gen-validate -proto envoy/service/status/v3/csds.proto -H "authorization: Bearer $(cat "$DATA_DIR/read-token")" -d '{"node_matchers": [{"node_id": {"prefix": "edge-"}}]}' 127.0.0.1:18000 envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus`: "needs grpcurl and a checkout of the Envoy, xds and protoc-gen-validate protos " +
			"(CSDS itself is test/integration's TestCSDS*)",
	},
	"relay.md": {
		"pylon relay --upstream pylon-1.example:18000,pylon-2.example:18000 --xds-addr :18000 --admin-addr 127.0.0.1:19001 --data-dir /var/lib/pylon-relay": "runs until stopped, in front of upstreams the page names; " +
			"the relay end to end is internal/relay's tests",
	},
	"render.md": {
		"pylon render --config ./config/ --node-id edge-1 --out /etc/envoy/xds --watch": "runs until stopped; --watch is internal/cli's TestRenderWatch",
	},
	"security.md": {
		`rev=$(etcdctl get /pylon/meta -w fields | awk '$1 == "\"Revision\"" { print $3 }')`: "needs etcdctl and an etcd cluster",
		`etcdctl compact "$rev" && etcdctl defrag --cluster`:                                 "needs etcdctl and an etcd cluster",
		`pylon serve --xds-tls-cert /run/pylon/svid.pem --xds-tls-key /run/pylon/svid-key.pem --xds-client-ca /run/pylon/bundle.pem --xds-require-client-cert --node-identity 'spiffe://{trust_domain}/ns/{cluster}/sa/{id}' --trust-domain example.org`: "needs SPIFFE SVIDs from a SPIRE agent; " +
			"the same flags run above with pylon certs",
	},
}

// docExitCodes are the docs' commands expected to fail, per file, with
// their exit code; every other command must exit 0.
var docExitCodes = map[string]map[string]int{
	"cli.md": {
		// The page says it is refused: routes still send to it.
		"pylon delete services api-canary": 1,
	},
	"render.md": {
		// The page shows these two refused, with their errors.
		"pylon render --config edge.yaml --node-id app-1 --out out":               1,
		"pylon render --config edge.yaml --node-id edge-1 --group apps --out out": 1,
	},
}

// docOutputs are what some commands must print (a command whose exit code
// says little, as curl's without -f), per file.
var docOutputs = map[string]map[string]string{
	"rest.md": {
		`curl -s -H 'Content-Type: application/json' -d '{"node":{"id":"demo"}}' http://127.0.0.1:18080/v3/discovery:clusters`: `"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster"`,
	},
}

// docSetup is how a file's commands are run: the harness's own `pylon
// serve` (started before the first command that needs a running Pylon,
// unless the file starts one), the proxies standing in for the file's
// Envoys, and what is done before some commands (their state).
type docSetup struct {
	serve   []string
	proxies []*corev3.Node
	before  map[string]func(*docRunner)
}

var docSetups = map[string]docSetup{
	"cli.md": {
		// The page's first command reads the tokens of a Pylon serving
		// /var/lib/pylon, as its export says.
		serve:   []string{"--data-dir", "/var/lib/pylon"},
		proxies: []*corev3.Node{{Id: "edge-1", Cluster: "edge"}},
		before: map[string]func(*docRunner){
			// The page registers to the example's service api, which
			// the rollback above took away.
			"pylon endpoints add api 10.0.1.21:8080 --ttl 30s": func(r *docRunner) {
				if stdout, stderr, code := r.bash("pylon apply -f examples/edge-gateway.yaml"); code != 0 {
					r.t.Fatalf("the setup's pylon apply: exit %d\n%s%s", code, stdout, stderr)
				}
			},
			// The page drives a rollout in progress.
			// The group and its cluster are served before the change, so
			// that the change is one to roll out (not a new group's first
			// config, which the pipeline may coalesce with it).
			"pylon rollout status": func(r *docRunner) {
				r.apply(strings.Replace(edgeGroup, "match: { cluster: edge }", edgeRollout, 1))
				r.apply(edgeCluster)
				r.waitFor("the group edge to be served", "pylon get clusters --group edge", "edge-web")
				r.apply(strings.Replace(edgeCluster, "1s", "4s", 1))
				r.waitFor("the rollout to start", "pylon rollout status -o json", `"group": "edge"`)
			},
		},
	},
	"security.md": {
		before: map[string]func(*docRunner){
			// The mTLS recipe is one of its own, on a data folder not
			// sealed by the encryption recipe above it.
			"pylon serve --xds-tls-cert pki/server.pem --xds-tls-key pki/server-key.pem --xds-client-ca pki/ca.pem --xds-require-client-cert --node-identity 'spiffe://{trust_domain}/ns/{cluster}/sa/{id}' --trust-domain example.org": freshData,
		},
	},
}

// edgeGroup, edgeCluster and edgeRollout make the state cli.md reads: a
// group edge (its node edge-1), a cluster it changes and a rollout.
const (
	edgeGroup   = "version: 1\ngroups:\n- name: edge\n  match: { cluster: edge }\n"
	edgeCluster = "version: 1\nresources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: edge-web\n  connect_timeout: 1s\n  type: STATIC\n"
	edgeRollout = "match: { cluster: edge }\n  rollout:\n    stages:\n    - { selector: { id: edge-1 }, bake: 1h }\n    - { share: 50%, bake: 1h }"
)

// apply stores a config through the CLI, as a doc's reader would.
func (r *docRunner) apply(config string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "setup.yaml"), []byte(config), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if stdout, stderr, code := r.bash("pylon apply -f setup.yaml"); code != 0 {
		r.t.Fatalf("the setup's pylon apply: exit %d\n%s%s\n%s", code, stdout, stderr, config)
	}
}

// waitFor runs cmd until its output holds want, within bound: a write
// through the API is published after it returns.
func (r *docRunner) waitFor(what, cmd, want string) {
	r.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		stdout, stderr, _ := r.bash(cmd)
		if bytes.Contains(stdout, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s within %v: %s says\n%s%s", what, bound, cmd, stdout, stderr)
		}
		time.Sleep(20 * time.Millisecond) // between polls of a condition
	}
}

// freshData removes the data folder of the server before it, which is
// stopped first.
func freshData(r *docRunner) {
	if r.main != nil {
		r.main.stop(r.t)
		r.main = nil
	}
	if err := os.RemoveAll(filepath.Join(r.dir, "pylon-data")); err != nil {
		r.t.Fatal(err)
	}
}

// docRoots are the absolute paths the docs use, rooted in each file's
// folder by the harness.
var docRoots = regexp.MustCompile(`(^|[ =])(/var/lib/pylon|/etc/pylon|/etc/envoy|/run/pylon|/run/svid|/tmp/)`)

// TestDocsCommands runs every command of the ```sh blocks of every file
// under docs/, each file in its own folder (holding a copy of the
// examples) against its own `pylon serve`, in order, through bash, with
// the built pylon (and pylonctl) first on PATH. `go test` and the fleet benchmark's
// commands are checked (the package, test names and flags exist), not
// run: the suite runs the tests, and the benchmarks take minutes.
func TestDocsCommands(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkDocLists(t, files)
	bin := buildPylon(t)
	for _, f := range files {
		name := filepath.Base(f)
		if why, ok := docSkippedFiles[name]; ok {
			t.Logf("skipped file: %s (%s)", name, why)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmds := docCommands(string(b))
		if len(cmds) == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newDocRunner(t, name, bin)
			for _, c := range cmds {
				r.run(c)
			}
		})
	}
}

// buildPylon builds pylon, and pylonctl beside it, into a folder of
// their own, for PATH, and returns pylon's path.
func buildPylon(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, prog := range []string{"pylon", "pylonctl"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, prog), "./cmd/"+prog)
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", prog, err, out)
		}
	}
	return filepath.Join(dir, "pylon")
}

// docCommand is one command of a doc: its text, continuation lines
// joined, comments dropped, and the line it starts on. A config block the
// doc marks `<!-- test: config NAME -->` (as the pages test/explain and
// internal/cli run do) is a command too: writing body to file.
type docCommand struct {
	line       int
	text       string
	file, body string
}

var configMarker = regexp.MustCompile(`^<!-- test: config (\S+) -->$`)

// docCommands returns the commands of md's ```sh blocks, in order: lines
// ending in a backslash continue on the next, and comments are dropped.
func docCommands(md string) []docCommand {
	var cmds []docCommand
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if m := configMarker.FindStringSubmatch(trimmed); m != nil && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "```") {
			end := i + 2
			for end < len(lines) && lines[end] != "```" {
				end++
			}
			cmds = append(cmds, docCommand{line: i + 3, file: m[1], body: strings.Join(lines[i+2:end], "\n") + "\n"})
			i = end
			continue
		}
		if trimmed != "```sh" {
			continue
		}
		cont := false
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			line := strings.TrimSpace(lines[i])
			if j := strings.Index(line, " #"); j >= 0 && !strings.Contains(line[:j], "'") {
				line = strings.TrimSpace(line[:j])
			}
			if !cont && (line == "" || strings.HasPrefix(line, "#")) {
				continue
			}
			more := strings.HasSuffix(line, `\`)
			line = strings.TrimSpace(strings.TrimSuffix(line, `\`))
			if cont {
				cmds[len(cmds)-1].text += " " + line
			} else {
				cmds = append(cmds, docCommand{line: i + 1, text: line})
			}
			cont = more
		}
	}
	return cmds
}

// checkDocLists fails when a listed command left its file, or a file
// its list names left docs/.
func checkDocLists(t *testing.T, files []string) {
	t.Helper()
	have := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, c := range docCommands(string(b)) {
			m[c.text] = true
		}
		have[filepath.Base(f)] = m
	}
	for name := range docSkippedFiles {
		if have[name] == nil {
			t.Errorf("skipped file %s is no longer in docs/: drop it from the list", name)
		}
	}
	for _, list := range []map[string]map[string]string{docSkipped, toWhy(docExitCodes), docOutputs} {
		for name, cmds := range list {
			for c := range cmds {
				if !have[name][c] {
					t.Errorf("docs/%s: listed command %q is no longer there: drop it from the list", name, c)
				}
			}
		}
	}
	for name, s := range docSetups {
		for c := range s.before {
			if !have[name][c] {
				t.Errorf("docs/%s: the setup before %q: the command is no longer there", name, c)
			}
		}
	}
}

func toWhy(m map[string]map[string]int) map[string]map[string]string {
	out := map[string]map[string]string{}
	for name, cmds := range m {
		out[name] = map[string]string{}
		for c, code := range cmds {
			out[name][c] = fmt.Sprint(code)
		}
	}
	return out
}

// docRunner runs one doc's commands in its own folder.
type docRunner struct {
	t        *testing.T
	name     string
	bin, dir string
	setup    docSetup
	env      map[string]string
	main     *server
	builds   map[string]string // a go build's output path: its package
}

func newDocRunner(t *testing.T, name, bin string) *docRunner {
	dir := t.TempDir()
	copyDir(t, filepath.Join(repo, "examples"), filepath.Join(dir, "examples"))
	return &docRunner{t: t, name: name, bin: bin, dir: dir, setup: docSetups[name], env: map[string]string{}, builds: map[string]string{}}
}

// rooted roots the docs' absolute paths in the runner's folder.
func (r *docRunner) rooted(s string) string {
	return docRoots.ReplaceAllString(s, "${1}"+r.dir+"${2}")
}

// listenAddr is a listen address of a doc's serve command.
var listenAddr = regexp.MustCompile(`(^|[ =])(127\.0\.0\.1|0\.0\.0\.0|localhost|\[::1?\])?:[0-9]{4,5}\b`)

// serverCommands are the pylon commands that talk to a running Pylon
// (and pylonctl's are all such).
var serverCommands = []string{"status", "get", "history", "diff", "apply", "delete", "rollback", "endpoints", "rollout"}

func (r *docRunner) run(c docCommand) {
	t := r.t
	t.Helper()
	where := fmt.Sprintf("docs/%s:%d", r.name, c.line)
	if c.file != "" {
		if err := os.WriteFile(filepath.Join(r.dir, c.file), []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: wrote %s", where, c.file)
		return
	}
	if why, ok := docSkipped[r.name][c.text]; ok {
		t.Logf("%s: skipped: %s (%s)", where, c.text, why)
		return
	}
	if f := r.setup.before[c.text]; f != nil {
		f(r)
	}
	text := r.rooted(c.text)
	fields := strings.Fields(text)
	switch {
	case fields[0] == "export":
		r.export(where, text)
		return
	case fields[0] == "go" && len(fields) > 1 && (fields[1] == "test" || fields[1] == "build"),
		strings.HasPrefix(fields[0], r.dir+"/tmp/"):
		r.check(where, c.text, fields)
		return
	case fields[0] == "pylon" && len(fields) > 1 && fields[1] == "serve":
		r.serve(where, text)
		return
	case (fields[0] == "pylonctl" || fields[0] == "pylon" && len(fields) > 1 && slices.Contains(serverCommands, fields[1])) && r.main == nil:
		r.serve(where, r.rooted("pylon serve "+strings.Join(r.setup.serve, " ")))
	}
	if r.main != nil {
		text = strings.NewReplacer("localhost:18000", r.main.xdsAddr, "127.0.0.1:18000", r.main.xdsAddr,
			"127.0.0.1:18080", r.main.restAddr).Replace(text)
	}
	stdout, stderr, code := r.bash(text)
	if want := docExitCodes[r.name][c.text]; code != want {
		t.Fatalf("%s: %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", where, c.text, code, want, stdout, stderr)
	}
	if want, ok := docOutputs[r.name][c.text]; ok && !bytes.Contains(stdout, []byte(want)) {
		t.Fatalf("%s: %s: the output does not hold %s\nstdout:\n%s\nstderr:\n%s", where, c.text, want, stdout, stderr)
	}
	t.Logf("%s: ok: %s", where, c.text)
}

// export keeps a variable for the commands after it.
func (r *docRunner) export(where, text string) {
	k, v, ok := strings.Cut(strings.TrimPrefix(text, "export "), "=")
	if !ok || strings.ContainsAny(v, `$'" `+"`") {
		r.t.Fatalf("%s: %q: only export NAME=VALUE is understood here", where, text)
	}
	r.env[k] = v
	r.t.Logf("%s: ok: %s", where, text)
}

// environ is the commands' environment: PATH has the built pylon first,
// the admin address is the running server's, and no PYLON_ variable of
// the test's own environment leaks in.
func (r *docRunner) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYLON_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Dir(r.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if r.main != nil {
		env = append(env, "PYLON_ADMIN_ADDR="+r.main.adminAddr)
	}
	for k, v := range r.env {
		env = append(env, k+"="+v)
	}
	return env
}

// bash runs one command line in the runner's folder, within bound.
func (r *docRunner) bash(text string) (stdout, stderr []byte, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir, cmd.Env = r.dir, r.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		r.t.Fatalf("%s: no exit within %v", text, bound)
	}
	if err != nil && cmd.ProcessState == nil {
		r.t.Fatalf("%s: %v", text, err)
	}
	return out.Bytes(), errb.Bytes(), cmd.ProcessState.ExitCode()
}

// serve replaces the running server, if any, with the doc's, on free
// loopback ports, and connects the file's proxies to it.
func (r *docRunner) serve(where, text string) {
	t := r.t
	t.Helper()
	if r.main != nil {
		r.main.stop(t)
		r.main = nil
	}
	text = listenAddr.ReplaceAllString(text, "${1}127.0.0.1:0")
	s := startServer(t, "bash", r.dir, []string{"-c", "exec " + text + ` "$@"`, "pylon"}, r.environ()...)
	t.Cleanup(func() { s.stop(t) })
	r.main = s
	conn := xdstest.Dial(t, s.xdsAddr)
	for _, n := range r.setup.proxies {
		st := xdstest.OpenADS(t, conn, n)
		st.Request(xdstype.ClusterURL)
		st.ACK(st.RecvType(xdstype.ClusterURL))
	}
	t.Logf("%s: ok (serving xDS on %s, admin on %s): %s", where, s.xdsAddr, s.adminAddr, text)
}

// goTestFlags are go test's own flags the docs use.
var goTestFlags = []string{"-v", "-count", "-run", "-bench", "-benchtime", "-race", "-timeout", "-cpu", "-short", "-benchmem"}

// check checks a `go test`, `go build` or built benchmark command
// without running it: its package exists, the tests or benchmarks it
// selects exist, and so does every flag it gives the program.
func (r *docRunner) check(where, text string, fields []string) {
	t := r.t
	t.Helper()
	for i, f := range fields {
		fields[i] = strings.Trim(f, "'")
	}
	switch {
	case fields[1] == "build":
		if len(fields) != 5 || fields[2] != "-o" {
			t.Fatalf("%s: %s: only go build -o OUT PKG is understood here", where, text)
		}
		src := packageSource(t, where, fields[4], false)
		if !strings.Contains(src, "package main") {
			t.Fatalf("%s: %s: %s is not a program", where, text, fields[4])
		}
		r.builds[fields[2+1]] = fields[4]
	case fields[1] == "test":
		r.checkTest(where, text, fields[2:])
	default:
		pkg, ok := r.builds[fields[0]]
		if !ok {
			t.Fatalf("%s: %s: runs a program no command above builds", where, text)
		}
		checkFlags(t, where, text, packageSource(t, where, pkg, false), fields[1:], nil)
	}
	t.Logf("%s: checked (not run): %s", where, text)
}

func (r *docRunner) checkTest(where, text string, args []string) {
	t := r.t
	t.Helper()
	var pkgs []string
	var run, bench string
	last := -1
	for i := 0; i < len(args); i++ {
		switch {
		case strings.HasPrefix(args[i], "./"):
			pkgs, last = append(pkgs, args[i]), i
		case args[i] == "-run" && i+1 < len(args):
			run, i = args[i+1], i+1
		case args[i] == "-bench" && i+1 < len(args):
			bench, i = args[i+1], i+1
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("%s: %s: names no package", where, text)
	}
	var src strings.Builder
	for _, p := range pkgs {
		src.WriteString(packageSource(t, where, p, true))
	}
	kind, sel := "Test", run
	if bench != "" {
		kind, sel = "Benchmark", bench
	}
	if sel != "" && sel != "^$" && sel != "." {
		top := regexp.MustCompile(strings.Split(sel, "/")[0])
		found := false
		for _, m := range regexp.MustCompile(`(?m)^func (`+kind+`\w*)\(`).FindAllStringSubmatch(src.String(), -1) {
			found = found || top.MatchString(m[1])
		}
		if !found {
			t.Fatalf("%s: %s: no %s function of %v matches %q", where, text, kind, pkgs, sel)
		}
	}
	checkFlags(t, where, text, src.String(), args[last+1:], goTestFlags)
}

// checkFlags fails when a flag in args is neither one of known nor
// defined by the flag package in src.
func checkFlags(t *testing.T, where, text, src string, args, known []string) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || slices.Contains(known, a) {
			continue
		}
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		def := regexp.MustCompile(`flag\.\w+\((?:&[\w.]+,\s*)?"` + regexp.QuoteMeta(name) + `"`)
		if !def.MatchString(src) {
			t.Fatalf("%s: %s: the program defines no flag -%s", where, text, name)
		}
	}
}

// packageSource is the Go source of a package of the repository (its
// test files too, with tests), which must exist.
func packageSource(t *testing.T, where, pkg string, tests bool) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repo, pkg, "*.go"))
	var b strings.Builder
	for _, f := range files {
		if !tests && strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	if b.Len() == 0 {
		t.Fatalf("%s: no Go package %s", where, pkg)
	}
	return b.String()
}

// A line ending in a backslash goes on on the next, comments are dropped
// (not inside quotes), and a config block marked for the test is a write.
func TestDocCommandsParse(t *testing.T) {
	md := "```sh\npylon serve \\\n  --config x.yaml   # file mode\n# alone\npylon explain 'GET http://a/#x' -H 'k: v'\n```\n" +
		"<!-- test: config x.yaml -->\n```yaml\na: 1\n```\n```yaml\nb: 2\n```\n"
	got := docCommands(md)
	want := []docCommand{
		{line: 2, text: "pylon serve --config x.yaml"},
		{line: 5, text: "pylon explain 'GET http://a/#x' -H 'k: v'"},
		{line: 9, file: "x.yaml", body: "a: 1\n"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("docCommands = %+v, want %+v", got, want)
	}
}
