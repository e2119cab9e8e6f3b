package rollout_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// cdsStates returns each node's CDS state and the version it is expected
// to hold, as GET /proxies reports them.
func (p *pylon) cdsStates() map[string][2]string {
	p.t.Helper()
	code, b := p.api("GET", "/proxies")
	var body struct{ Streams []status.Stream }
	if code != http.StatusOK || json.Unmarshal(b, &body) != nil {
		p.t.Fatalf("GET /proxies: %d %s", code, b)
	}
	out := map[string][2]string{}
	for _, s := range body.Streams {
		for _, ty := range s.Types {
			if ty.Type == "CDS" {
				out[s.Node] = [2]string{ty.State, ty.Expected}
			}
		}
	}
	return out
}

// While a rollout runs, a proxy outside the stage holds the previous
// version and that is all it should hold: its status is SYNCED at the
// previous version, not STALE against the new one; the stage's proxies
// are SYNCED at the new one.
func TestStatusDuringRollout(t *testing.T) {
	cfg, p, ps, in, out := onV1(t, t.TempDir())
	v1 := in[0].acked
	writeConfig(t, cfg, configFor(2, time.Hour))
	for _, x := range in {
		x.recv(t, 2)
	}
	v2 := in[0].acked
	want := func(x *proxy) [2]string {
		if firstStage(x.id) == 1 {
			return [2]string{status.Synced, v2}
		}
		return [2]string{status.Synced, v1}
	}
	for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
		got, wrong := p.cdsStates(), ""
		for _, x := range ps {
			if got[x.id] != want(x) {
				wrong = x.id
			}
		}
		if wrong == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (stage %d) is %v, want %v (v1 %s, v2 %s)", wrong, firstStage(wrong), got[wrong], want(&proxy{id: wrong}), v1, v2)
		}
	}
	for _, x := range out {
		x.silent()
	}
}
