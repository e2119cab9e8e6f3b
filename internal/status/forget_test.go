package status

import (
	"testing"
	"time"
)

// A forgotten stream (a REST poll answered) leaves no closed entry and no
// count behind, and does not push a real disconnect out of the bounded
// list of closed streams.
func TestForgetLeavesNoTrace(t *testing.T) {
	tr := NewTracker(Options{Retention: time.Hour, MaxGone: 3})
	now := time.Now()
	tr.Seen(1, Info{Node: "left"}, "g", now)
	tr.Requested(1, Info{Node: "left"}, "CDS", now)
	tr.Closed(1, now)
	for i := range uint64(100) {
		id := 100 + i
		tr.Seen(id, Info{Node: "poller"}, "g", now)
		tr.Requested(id, Info{Node: "poller"}, "CDS", now)
		tr.Forget(id)
	}
	// One forgotten after it closed too.
	tr.Seen(7, Info{Node: "poller"}, "g", now)
	tr.Closed(7, now)
	tr.Forget(7)
	streams := tr.Streams()
	if len(streams) != 1 || streams[0].Node != "left" || streams[0].Gone == nil {
		t.Fatalf("streams %+v, want only the closed stream of node left", streams)
	}
	for state, n := range tr.States() {
		if n != 0 {
			t.Fatalf("%d open types counted %s after every stream ended", n, state)
		}
	}
}
