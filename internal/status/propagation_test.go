package status_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

// The propagation of the newest change: who takes part (holds a type version
// the change introduced), who is done and when, who is pending; a publish
// of nothing new keeps the change; a repeat ACK does not move the time.
func TestPropagation(t *testing.T) {
	expected := map[string]string{"a/cds": "c1", "a/lds": "l1", "b/cds": "c1"}
	tr := newFeed(status.NewTracker(status.Options{Expected: func(g, u string) string { return expected[g+"/"+u] }, Abbrev: func(u string) string { return u }}))
	t0 := time.Now()
	if r := tr.Propagation(); len(r.Groups) != 0 || !r.At.IsZero() {
		t.Fatalf("propagation before any publish: %+v", r)
	}
	tr.Published(map[string][]string{"cds": {"c1"}, "lds": {"l1"}}, t0)
	open := func(id uint64, node, group string, types ...string) {
		tr.Seen(id, status.Info{Node: node}, group, t0)
		for _, u := range types {
			tr.Sent(id, status.Info{Node: node}, u, status.Stamp{Version: expected[group+"/"+u], At: t0}, 0, nil, nil)
		}
	}
	open(1, "a-1", "a", "cds", "lds")
	open(2, "a-2", "a", "cds", "lds")
	open(3, "b-1", "b", "cds")
	// The second change: a's cds only. b keeps c1, a's lds keeps l1.
	expected["a/cds"] = "c2"
	t1 := t0.Add(10 * time.Second)
	tr.Published(map[string][]string{"cds": {"c2", "c1"}, "lds": {"l1"}}, t1)
	tr.Published(map[string][]string{"cds": {"c2", "c1"}, "lds": {"l1"}}, t1.Add(time.Minute)) // nothing new
	tr.Sent(1, status.Info{}, "cds", status.Stamp{Version: "c2", At: t1}, 0, nil, nil)
	tr.ACKed(1, status.Info{}, "cds", status.Stamp{Version: "c2", At: t1.Add(3 * time.Second)})
	tr.ACKed(1, status.Info{}, "cds", status.Stamp{Version: "c2", At: t1.Add(9 * time.Second)}) // a repeat
	tr.ACKed(3, status.Info{}, "cds", status.Stamp{Version: "c1", At: t1.Add(time.Second)})     // not part of it
	r := tr.Propagation()
	if !r.At.Equal(t1) {
		t.Fatalf("the newest change is at %v, want %v", r.At, t1)
	}
	want := []status.GroupPropagation{{
		Group: "a", Total: 2, Done: 1, DoneAfter: []time.Duration{3 * time.Second},
		Pending: []status.PendingStream{{Stream: 2, Node: "a-2", States: map[string]string{"cds": status.Stale, "lds": status.Stale}}}, PendingTotal: 1,
	}}
	if d := cmp.Diff(want, r.Groups); d != "" {
		t.Fatalf("propagation (-want +got):\n%s", d)
	}
	tr.Closed(2, t1.Add(time.Minute))
	if g := tr.Propagation().Groups[0]; g.Total != 1 || g.PendingTotal != 0 {
		t.Fatalf("a closed stream still takes part: %+v", g)
	}
}

// A propagation lists at most MaxPending streams and counts the rest.
func TestPropagationPendingBounded(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{Expected: func(string, string) string { return "v1" }}))
	t0 := time.Now()
	tr.Published(map[string][]string{"cds": {"v1"}}, t0)
	for i := range uint64(status.MaxPending + 50) {
		tr.Seen(i, status.Info{Node: "n"}, "g", t0)
		tr.Sent(i, status.Info{Node: "n"}, "cds", status.Stamp{Version: "v1", At: t0}, 0, nil, nil)
	}
	g := tr.Propagation().Groups[0]
	if len(g.Pending) != status.MaxPending || g.PendingTotal != status.MaxPending+50 || g.Total != status.MaxPending+50 {
		t.Fatalf("pending %d listed, %d counted, total %d", len(g.Pending), g.PendingTotal, g.Total)
	}
}
