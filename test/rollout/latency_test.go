package rollout_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// Push latency counts from when a change reaches a proxy's stage, not from
// its acceptance: the proxies of the later stages, held back for a bake
// each, are pushed the change as fast as the first stage's.
func TestPushLatencyExcludesTheBake(t *testing.T) {
	const bake = 1500 * time.Millisecond
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
	if len(byStage[2]) == 0 || len(byStage[3]) == 0 {
		t.Fatalf("proxies by first stage: %d, %d, %d: the later stages need one", len(byStage[1]), len(byStage[2]), len(byStage[3]))
	}
	writeConfig(t, cfg, configFor(2, bake))
	start := time.Now()
	for stage := 1; stage <= 3; stage++ {
		for _, x := range byStage[stage] {
			x.recv(t, 2)
		}
	}
	if took := time.Since(start); took < 2*bake {
		t.Fatalf("the last stage's proxies had v2 %v after the change, before two bakes (%v)", took, 2*bake)
	}
	var sum struct {
		Latency []struct {
			Type   string  `json:"type"`
			Window int     `json:"window"`
			MaxMs  float64 `json:"maxMs"`
		} `json:"latency"`
	}
	waitUntil(t, "16 CDS push latencies", func() bool {
		code, b := p.api("GET", "/summary")
		if code != http.StatusOK || json.Unmarshal(b, &sum) != nil {
			t.Fatalf("GET /summary: %d %s", code, b)
		}
		return len(sum.Latency) == 1 && sum.Latency[0].Window == len(ps)
	})
	if got := time.Duration(sum.Latency[0].MaxMs * float64(time.Millisecond)); got >= bake/2 {
		t.Errorf("the slowest push took %v: the bake (%v) is counted in it", got, bake)
	}
}
