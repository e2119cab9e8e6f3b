package status_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

// Percentiles are over the newest samples only, nearest rank. The window
// is kept in shards by stream: here the ACKs come from as many streams as
// there are shards, in turn, so the window is the newest LatencySamples.
func TestLatencies(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }}))
	t0 := time.Now()
	info := status.Info{Node: "n"}
	for id := range uint64(status.RingShards) {
		tr.Seen(id, info, "g", t0)
	}
	// Versions v0..v(LatencySamples+99) each accepted at t0+1s and ACKed
	// i ms later: the first 100 fall out of the window.
	for i := range status.LatencySamples + 100 {
		v := "v" + strconv.Itoa(i)
		tr.Published(map[string][]string{"cds": {v}}, t0.Add(time.Second))
		tr.ACKed(uint64(i%status.RingShards), info, "cds", status.Stamp{Version: v, At: t0.Add(time.Second + time.Duration(i)*time.Millisecond)})
		tr.Harvest() // as a read between the ACKs would
	}
	got := tr.Latencies()
	want := []status.Latency{{
		Type: "CDS", Window: status.LatencySamples, Total: status.LatencySamples + 100,
		P50: 100*time.Millisecond + 511*time.Millisecond, P90: 100*time.Millisecond + 921*time.Millisecond,
		P99: 100*time.Millisecond + 1013*time.Millisecond, Max: 100*time.Millisecond + 1023*time.Millisecond,
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("latencies (-want +got):\n%s", d)
	}
	// A second ACK of the same version is not a second push.
	tr.ACKed(1, info, "cds", status.Stamp{Version: "v5", At: t0.Add(time.Hour)})
	tr.Harvest()
	tr.ACKed(1, info, "cds", status.Stamp{Version: "v5", At: t0.Add(2 * time.Hour)})
	if n := tr.Latencies()[0].Total; n != status.LatencySamples+101 {
		t.Fatalf("total %d after one more first ACK and a repeat", n)
	}
}
