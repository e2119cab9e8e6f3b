package status_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

// A staged rollout holds a change back from the nodes outside its stage
// until the next stage starts: a node of a later stage measures its push
// latency from that start (Released), not from the change's acceptance, so
// that the bake time is not counted as push latency. A node of an earlier
// stage, sent the change before the release, still measures from the
// acceptance, however late it ACKs.
func TestPushLatencyExcludesTimeHeldBackByARolloutStage(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }}))
	t0 := time.Now()
	for id, node := range []string{"stage1-fast", "stage2", "stage1-slow"} {
		tr.Seen(uint64(id), status.Info{Node: node}, "g", t0)
	}
	accepted := t0.Add(time.Second)
	stage2 := accepted.Add(5 * time.Minute)
	tr.Published(map[string][]string{"cds": {"v2"}}, accepted)
	ms := time.Millisecond
	// Stage 1: sent at once; one ACKs at once, the other only after the
	// next stage started.
	tr.Sent(0, status.Info{Node: "stage1-fast"}, "cds", status.Stamp{Version: "v2", At: accepted.Add(10 * ms)}, 1, nil, nil)
	tr.ACKed(0, status.Info{Node: "stage1-fast"}, "cds", status.Stamp{Version: "v2", At: accepted.Add(20 * ms)})
	tr.Sent(2, status.Info{Node: "stage1-slow"}, "cds", status.Stamp{Version: "v2", At: accepted.Add(10 * ms)}, 1, nil, nil)
	// Stage 2 starts: the change reaches the rest of the group.
	tr.Released(map[string][]string{"cds": {"v2"}}, stage2)
	tr.Sent(1, status.Info{Node: "stage2"}, "cds", status.Stamp{Version: "v2", At: stage2.Add(10 * ms)}, 1, nil, nil)
	tr.ACKed(1, status.Info{Node: "stage2"}, "cds", status.Stamp{Version: "v2", At: stage2.Add(30 * ms)})
	tr.ACKed(2, status.Info{Node: "stage1-slow"}, "cds", status.Stamp{Version: "v2", At: stage2.Add(40 * ms)})
	// A stream opened after the release gets the change as its first
	// config: not a push.
	late := stage2.Add(time.Minute)
	tr.Seen(3, status.Info{Node: "late"}, "g", late)
	tr.Sent(3, status.Info{Node: "late"}, "cds", status.Stamp{Version: "v2", At: late.Add(10 * ms)}, 1, nil, nil)
	tr.ACKed(3, status.Info{Node: "late"}, "cds", status.Stamp{Version: "v2", At: late.Add(20 * ms)})

	got := tr.Latencies()
	slow := 5*time.Minute + 40*ms
	want := []status.Latency{{Type: "CDS", Window: 3, Total: 3, P50: 30 * ms, P90: slow, P99: slow, Max: slow}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("latencies (-want +got):\n%s", d)
	}
}
