package xds

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
)

// A stream's first sync of a type is timed from the stream's open, once:
// a later version sent, expected and ACKed is no first sync. (The
// tracker's TestFirstSync, from when it was told every push.)
func TestFirstSync(t *testing.T) {
	t0 := time.Now()
	l := &StreamStatus{opened: t0}
	l.setGroup(&fleet.Group{Name: "g"})
	var rec liveType
	var got []time.Duration
	note := func(d time.Duration) {
		if d > 0 {
			got = append(got, d)
		}
	}
	for i, v := range []string{"v1", "v2"} {
		at := t0.Add(time.Duration(2*i+1) * time.Second)
		note(l.sent(&rec, "cds", status.Stamp{Version: v, At: at}, 0, nil, nil, false))
		note(l.expected(&rec, "cds", v, "", at))
		first, _ := l.acked(&rec, "cds", status.Stamp{Version: v, At: at.Add(time.Second)})
		note(first)
	}
	if len(got) != 1 || got[0] != 2*time.Second {
		t.Fatalf("first syncs %v, want cds after 2s, once", got)
	}
}
