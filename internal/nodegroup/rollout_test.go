package nodegroup

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

func TestNodeShareStableAndSpread(t *testing.T) {
	if NodeShare("edge-1") != NodeShare("edge-1") {
		t.Fatal("the share of a node id changes between calls")
	}
	// 10,000 ids: each decile holds about a tenth.
	var buckets [10]int
	for i := range 10000 {
		s := NodeShare(fmt.Sprintf("node-%d", i))
		if s < 0 || s >= 1 {
			t.Fatalf("share %v out of [0,1)", s)
		}
		buckets[int(s*10)]++
	}
	for i, n := range buckets {
		if math.Abs(float64(n)-1000) > 150 {
			t.Errorf("decile %d holds %d of 10000 ids, want about 1000", i, n)
		}
	}
}

// A node taken at a stage stays taken at every later stage, and whether it
// is taken depends only on its id and the stage (a reconnect changes
// nothing).
func TestTakesGrowsWithStages(t *testing.T) {
	r := &Rollout{Stages: []Stage{
		{Selector: &Match{Metadata: map[string]string{"canary": "true"}}},
		{Share: 0.01}, {Share: 0.10}, {Share: 0.5}, {Share: 1},
	}}
	taken := make([]int, len(r.Stages)+1)
	for i := range 2000 {
		n := Node{ID: fmt.Sprintf("edge-%d", i)}
		if i%100 == 0 {
			n.Metadata = map[string]string{"canary": "true"}
		}
		was := false
		for stage := 0; stage <= len(r.Stages); stage++ {
			in := r.Takes(stage, n)
			if was && !in {
				t.Fatalf("%s taken at stage %d, not at stage %d", n.ID, stage-1, stage)
			}
			if in != r.Takes(stage, Node{ID: n.ID, Metadata: n.Metadata}) {
				t.Fatalf("%s: membership differs for the same node", n.ID)
			}
			if in {
				taken[stage]++
			}
			was = in
		}
	}
	if taken[0] != 0 || taken[1] != 20 || taken[len(r.Stages)] != 2000 {
		t.Fatalf("taken by stage = %v, want 0 at stage 0, the 20 canaries at 1, all 2000 at the last", taken)
	}
	if taken[3] < 200 || taken[3] > 260 {
		t.Errorf("stage 3 (10%% + canaries) takes %d of 2000", taken[3])
	}
}

func TestShareDecoding(t *testing.T) {
	for in, want := range map[string]float64{`"10%"`: 0.1, `"0.5%"`: 0.005, `25`: 0.25, `"100%"`: 1} {
		var s Share
		if err := json.Unmarshal([]byte(in), &s); err != nil || math.Abs(float64(s)-want) > 1e-12 {
			t.Errorf("%s: got %v, %v; want %v", in, s, err, want)
		}
	}
	for _, in := range []string{`"ten"`, `"120%"`, `-1`, `true`} {
		var s Share
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s: accepted as %v", in, s)
		}
	}
}

// JoinsAt names the first stage Takes says yes at, and why.
func TestJoinsAtIsTheFirstStageThatTakes(t *testing.T) {
	r := &Rollout{Stages: []Stage{{Selector: &Match{ID: "canary-*"}}, {Share: 0.1}, {Share: 0.5}}}
	for i := range 200 {
		n := Node{ID: fmt.Sprintf("node-%d", i)}
		if i%20 == 0 {
			n.ID = fmt.Sprintf("canary-%d", i)
		}
		stage, why := r.JoinsAt(n)
		first := 0
		for s := 1; s <= len(r.Stages); s++ {
			if r.Takes(s, n) {
				first = s
				break
			}
		}
		if stage != first || why == "" {
			t.Fatalf("%s: JoinsAt %d (%s), Takes first at %d", n.ID, stage, why, first)
		}
		if stage == 1 && why != "it matches the stage's selector" {
			t.Errorf("%s joins at the canary stage because %q", n.ID, why)
		}
	}
}
