package rollout_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// docStep is a fenced block of docs/rollouts.md after a `<!-- test: ... -->`
// comment: the comment's words and the block's body.
type docStep struct {
	marker []string
	body   string
	line   int
}

var markerRE = regexp.MustCompile(`^<!-- test: (.*) -->$`)

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
		end := i + 2
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: unterminated block", path, i+2)
		}
		out = append(out, docStep{marker: strings.Fields(m[1]), body: strings.Join(lines[i+2:end], "\n") + "\n", line: i + 1})
		i = end
	}
	return out
}

func execCLI(args ...string) (int, string, string) {
	var out, stderr bytes.Buffer
	code := cli.Execute(context.Background(), args, &out, &stderr)
	return code, out.String(), stderr.String()
}

// TestRolloutsDoc runs docs/rollouts.md as written: the policy validates;
// the refused policy is refused with the errors shown; the config is
// served to ten proxies (one a canary, by its metadata), the change rolls
// out to the canary only, and each command shown is run against the
// running Pylon and does what the page says.
func TestRolloutsDoc(t *testing.T) {
	doc, err := filepath.Abs("../../docs/rollouts.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := docSteps(t, doc)
	t.Chdir(t.TempDir())
	var p *pylon
	var ps []*proxy
	var rejected *discoveryv3.DiscoveryResponse
	config, ran := "", 0
	for i, s := range steps {
		switch s.marker[0] {
		case "config":
			config = s.body
			writeConfig(t, s.marker[1], config)
			if code, _, stderr := execCLI("validate", s.marker[1]); code != 0 {
				t.Fatalf("rollouts.md:%d: pylon validate: %s", s.line, stderr)
			}
		case "refused":
			dir := t.TempDir()
			writeConfig(t, filepath.Join(dir, s.marker[1]), s.body)
			if i+1 >= len(steps) || steps[i+1].marker[0] != "errors" {
				t.Fatalf("rollouts.md:%d: a refused config without its errors block", s.line)
			}
			checkRefused(t, dir, s.marker[1], steps[i+1])
		case "change":
			// The change replaces the config's resources.
			changed := config[:strings.Index(config, "resources:")] + s.body
			if p == nil {
				p, ps = serveDoc(t, s.marker[1])
				writeConfig(t, s.marker[1], changed)
				// Stage 1 is the canaries: canary-0 gets v2. (That the
				// others get nothing is TestCleanRolloutStageByStage's.)
				ps[len(ps)-1].recv(t, 2)
				break
			}
			// A change during a rollout starts a new one at stage 1:
			// the canary gets v3, as its NACK step below expects.
			writeConfig(t, s.marker[1], changed)
			rejected = nextVersion(t, ps[len(ps)-1], 3)
		case "nack":
			nackDoc(t, p, ps[len(ps)-1], rejected, s)
		case "run":
			runDoc(t, p, s)
			ran++
		}
	}
	if ran != 5 || p == nil || rejected == nil {
		t.Fatalf("ran %d commands of the page, want 5, and a NACK", ran)
	}
}

// serveDoc serves the config and connects ten proxies, the last canary-0
// with metadata canary: "true", each holding v1.
func serveDoc(t *testing.T, cfg string) (*pylon, []*proxy) {
	t.Helper()
	p := start(t, cfg, t.TempDir())
	ps := p.proxies(9)
	md, _ := structpb.NewStruct(map[string]any{"canary": "true"})
	canary := &proxy{id: "canary-0", s: xdstest.OpenADS(t, p.conn, &corev3.Node{Id: "canary-0", Metadata: md})}
	canary.s.Request(xdstype.ClusterURL)
	ps = append(ps, canary)
	for _, x := range ps {
		x.recv(t, 1)
	}
	return p, ps
}

// nextVersion ACKs what the commands before sent the canary (the halt's
// v1, the resume's v2) until version want comes, which it returns unACKed.
func nextVersion(t *testing.T, x *proxy, want int) *discoveryv3.DiscoveryResponse {
	t.Helper()
	for range 4 {
		r := x.s.RecvType(xdstype.ClusterURL)
		if timeout(t, r) == want {
			return r
		}
		x.s.ACK(r)
		x.acked = r.VersionInfo
	}
	t.Fatalf("%s: no v%d in four responses", x.id, want)
	return nil
}

// nackDoc has the canary reject the change with the error the page
// shows; the rollout must halt on it and send the canary back the version
// every node ran before (v1).
func nackDoc(t *testing.T, p *pylon, canary *proxy, rejected *discoveryv3.DiscoveryResponse, s docStep) {
	t.Helper()
	if rejected == nil {
		t.Fatalf("rollouts.md:%d: a NACK before a change reached the canary", s.line)
	}
	canary.s.NACK(rejected, canary.acked, strings.TrimSpace(s.body))
	waitUntil(t, "the canary's NACK to halt the rollout", func() bool {
		rs := p.rollouts()
		return len(rs) == 1 && rs[0].Halted == rollout.ReasonNACK
	})
	if st := one(t, p.rollouts()); st.HaltedStage != 1 || !strings.Contains(st.Detail, canary.id) || !strings.Contains(st.Detail, strings.TrimSpace(s.body)) {
		t.Fatalf("rollouts.md:%d: halted %+v: want stage 1, the detail naming %s and its error", s.line, st, canary.id)
	}
	canary.recv(t, 1) // the stage rolled back
}

func checkRefused(t *testing.T, dir, name string, errs docStep) {
	t.Helper()
	wd, _ := os.Getwd()
	t.Chdir(dir)
	code, _, stderr := execCLI("validate", name)
	t.Chdir(wd)
	if code == 0 {
		t.Fatalf("rollouts.md:%d: the refused policy was accepted", errs.line)
	}
	for _, l := range strings.Split(strings.TrimSpace(errs.body), "\n") {
		if !strings.Contains(stderr, l) {
			t.Errorf("rollouts.md:%d: the refusal\n%s\ndoes not say\n%s", errs.line, stderr, l)
		}
	}
}

// runDoc runs a command of the page against p and checks the rollout's
// state after it.
func runDoc(t *testing.T, p *pylon, s docStep) {
	t.Helper()
	args := strings.Fields(strings.TrimSpace(s.body))
	if len(args) < 3 || args[0] != "pylon" || args[1] != "rollout" {
		t.Fatalf("rollouts.md:%d: not a pylon rollout command: %q", s.line, s.body)
	}
	code, out, stderr := execCLI(append(args[1:], "--admin-addr", p.admin, "--data-dir", p.dir)...)
	if code != 0 {
		t.Fatalf("rollouts.md:%d: %v: exit %d: %s", s.line, args, code, stderr)
	}
	st := one(t, p.rollouts())
	switch args[2] {
	case "status":
		if st.Halted != "" {
			if !regexp.MustCompile(`(?m)^edge\s+0/3\s+` + st.From + `\s+` + st.To + `\s+HALTED at stage 1 \(nack\): .*canary-0`).MatchString(out) {
				t.Fatalf("rollouts.md:%d: pylon rollout status, halted:\n%s", s.line, out)
			}
			break
		}
		if !regexp.MustCompile(`(?m)^edge\s+1/3\s+` + st.From + `\s+` + st.To + `\s+next stage in`).MatchString(out) {
			t.Fatalf("rollouts.md:%d: pylon rollout status:\n%s", s.line, out)
		}
	case "promote":
		if st.Stage != 2 || !strings.Contains(out, "stage 2 of 3") {
			t.Fatalf("rollouts.md:%d: after promote: %+v\n%s", s.line, st, out)
		}
	case "halt":
		if st.Halted != rollout.ReasonOperator || st.Stage != 0 {
			t.Fatalf("rollouts.md:%d: after halt: %+v", s.line, st)
		}
	case "resume":
		if st.Halted != "" || st.Stage != 2 {
			t.Fatalf("rollouts.md:%d: after resume: %+v", s.line, st)
		}
	default:
		t.Fatalf("rollouts.md:%d: %s is not run by this test", s.line, args[2])
	}
}
