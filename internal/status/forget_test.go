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
	// Forgotten after they were refused or closed too: MaxGone (3) such
	// would push the real disconnect out if they kept their places.
	for id := range uint64(3) {
		tr.Seen(7+id, Info{Node: "poller"}, "g", now)
		if id == 0 {
			tr.Refused(7+id, Info{Node: "poller"}, "flood", "", now)
		} else {
			tr.Closed(7+id, now)
		}
		tr.Forget(7 + id)
	}
	tr.Seen(20, Info{Node: "later"}, "g", now)
	tr.Closed(20, now)
	streams := tr.Streams()
	if len(streams) != 2 || streams[0].Node != "later" || streams[1].Node != "left" || streams[1].Gone == nil {
		t.Fatalf("streams %+v, want the closed streams of nodes later and left", streams)
	}
	for state, n := range tr.States() {
		if n != 0 {
			t.Fatalf("%d open types counted %s after every stream ended", n, state)
		}
	}
}
