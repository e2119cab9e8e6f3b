package rollout_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/rollout"
)

// split returns the proxies the first stage takes and the others; the test
// needs both.
func split(t *testing.T, ps []*proxy) (in, out []*proxy) {
	t.Helper()
	for _, p := range ps {
		if firstStage(p.id) == 1 {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	if len(in) == 0 || len(out) == 0 {
		t.Fatalf("%d proxies in the first stage and %d outside: pick other ids", len(in), len(out))
	}
	return in, out
}

// onV1 serves configFor(1) (hour-long bakes) from a fresh config file in
// data, to twelve proxies that all receive and ACK it; it returns the file,
// the daemon and the proxies, split by the first stage.
func onV1(t *testing.T, data string) (cfg string, p *pylon, ps, in, out []*proxy) {
	t.Helper()
	cfg = filepath.Join(t.TempDir(), "pylon.yaml")
	writeConfig(t, cfg, configFor(1, time.Hour))
	p = start(t, cfg, data)
	ps = p.proxies(12)
	for _, x := range ps {
		x.recv(t, 1)
	}
	in, out = split(t, ps)
	return cfg, p, ps, in, out
}

func one(t *testing.T, rs []rollout.Status) rollout.Status {
	t.Helper()
	if len(rs) != 1 || rs[0].Group != "edge" {
		t.Fatalf("rollouts %+v, want one, of group edge", rs)
	}
	return rs[0]
}

// Issue 17: a NACK in the first stage halts the rollout; the rest of the
// group never receives the new version, and the stage's proxies get the
// previous version back. A later change is refused until it supersedes the
// halted rollout.
func TestNACKInFirstStageHalts(t *testing.T) {
	cfg, p, ps, in, out := onV1(t, t.TempDir())

	writeConfig(t, cfg, configFor(2, time.Hour))
	// The stage's first proxy rejects v2, the others accept it.
	bad := in[0].get(t, 2)
	for _, x := range in[1:] {
		x.recv(t, 2)
	}
	in[0].s.NACK(bad, in[0].acked, "cluster web: bad connect_timeout")
	waitUntil(t, "the halt", func() bool { return one(t, p.rollouts()).Halted == rollout.ReasonNACK })
	s := one(t, p.rollouts())
	if s.HaltedStage != 1 || s.Stage != 0 || !strings.Contains(s.Detail, in[0].id) {
		t.Fatalf("halted rollout %+v: want stage 0, halted at 1, the NACKing node named", s)
	}
	// Rolled back: every proxy of the stage, the NACKing one too, is
	// sent v1 again; the others were sent nothing at all.
	for _, x := range in {
		x.recv(t, 1)
	}
	for _, x := range out {
		x.silent()
	}

	// A change while halted is refused (file mode: the pipeline's
	// refusal, the served config unchanged) ...
	writeConfig(t, cfg, configFor(3, time.Hour))
	waitUntil(t, "the refusal", func() bool {
		_, b := p.api("GET", "/status")
		return strings.Contains(string(b), "rollout halted")
	})
	for _, x := range ps {
		x.silent()
	}
	// ... until it supersedes the halted rollout: v3 rolls out from v1.
	if code, b := p.api("POST", "/v1/rollouts/edge/supersede"); code != http.StatusOK {
		t.Fatalf("supersede: %d %s", code, b)
	}
	for _, x := range in {
		x.recv(t, 3)
	}
	for _, x := range out {
		x.silent()
	}
	if s := one(t, p.rollouts()); s.Halted != "" || s.Stage != 1 {
		t.Fatalf("the superseding rollout: %+v", s)
	}
}

// Issue 17: a clean rollout reaches every proxy stage by stage, each stage
// after the bake of the one before.
func TestCleanRolloutStageByStage(t *testing.T) {
	const bake = 400 * time.Millisecond
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeConfig(t, cfg, configFor(1, bake))
	p := start(t, cfg, t.TempDir())
	ps := p.proxies(16)
	for _, x := range ps {
		x.recv(t, 1)
	}
	byStage := map[int][]*proxy{}
	for _, x := range ps {
		byStage[firstStage(x.id)] = append(byStage[firstStage(x.id)], x)
	}
	if len(byStage[1]) == 0 || len(byStage[2]) == 0 || len(byStage[3]) == 0 {
		t.Fatalf("proxies by first stage: %d, %d, %d: every stage needs one", len(byStage[1]), len(byStage[2]), len(byStage[3]))
	}
	writeConfig(t, cfg, configFor(2, bake))
	var at [4]time.Time
	for stage := 1; stage <= 3; stage++ {
		for _, x := range byStage[stage] {
			x.recv(t, 2)
		}
		at[stage] = time.Now()
		// The later stages' proxies are not sent v2 before their stage.
		for later := stage + 1; later <= 3; later++ {
			for _, x := range byStage[later] {
				x.silent()
			}
		}
	}
	for stage := 2; stage <= 3; stage++ {
		// A stage starts a bake after the one before it started; the
		// proxies received it after that.
		if gap := at[stage].Sub(at[stage-1]); gap < bake/2 {
			t.Errorf("stage %d reached its proxies %v after stage %d, want about the %v bake", stage, gap, stage-1, bake)
		}
	}
	waitUntil(t, "the rollout's end", func() bool { return len(p.rollouts()) == 0 })
	for _, x := range ps {
		x.silent()
	}
}

// Issue 17: a restart of Pylon mid-rollout resumes it where it was: the
// reconnecting proxies of the stage get the new version, the others the
// previous one, and the rollout goes on from there.
func TestRestartResumes(t *testing.T) {
	data := t.TempDir()
	cfg, p, _, in, out := onV1(t, data)
	writeConfig(t, cfg, configFor(2, time.Hour))
	for _, x := range in {
		x.recv(t, 2)
	}
	before := one(t, p.rollouts())
	p.stop()

	p = start(t, cfg, data)
	after := one(t, p.rollouts())
	if after.Stage != 1 || after.From != before.From || after.To != before.To || !after.EnteredAt.Equal(before.EnteredAt) {
		t.Fatalf("after the restart %+v, before %+v", after, before)
	}
	ps := p.proxies(12)
	for _, x := range ps {
		want := 1
		if firstStage(x.id) == 1 {
			want = 2
		}
		x.recv(t, want)
	}
	_ = out
	// The rollout goes on: promoted, the second stage gets v2.
	if code, b := p.api("POST", "/v1/rollouts/edge/promote"); code != http.StatusOK {
		t.Fatalf("promote: %d %s", code, b)
	}
	for _, x := range ps {
		switch firstStage(x.id) {
		case 2:
			x.recv(t, 2)
		default:
			x.silent()
		}
	}
}
