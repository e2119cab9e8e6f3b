package status_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
)

// A live stream's stamps and group are read when asked: what it holds
// changes without a word to the tracker, and its state, counts and
// rollout follow. Once it ends, it shows what it last said.
func TestLiveStreamReadWhenAsked(t *testing.T) {
	tr := status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }})
	t0 := time.Now()
	live := statustest.NewStream("edge")
	info := status.Info{Node: "n1"}
	tr.Attach(1, info, live, t0)
	tr.Requested(1, info, "cds", t0)
	state := func() (string, string) {
		s := tr.Streams()
		if len(s) != 1 || len(s[0].Types) != 1 {
			t.Fatalf("streams %+v", s)
		}
		return s[0].Group, s[0].Types[0].State
	}
	if g, st := state(); g != "edge" || st != status.NotSent {
		t.Fatalf("before anything was sent: group %q, %s; want edge, NOT SENT", g, st)
	}
	sent := status.Stamp{Version: "v1", Nonce: "1", At: t0.Add(time.Second), Resources: 2}
	live.Set("cds", status.Stamps{Expected: "v1", Sent: sent, Responses: 1, ResponseBytes: 100})
	if _, st := state(); st != status.Stale {
		t.Fatalf("sent, not ACKed: %s, want STALE", st)
	}
	acked := status.Stamp{Version: "v1", Nonce: "1", At: t0.Add(2 * time.Second)}
	live.Set("cds", status.Stamps{Expected: "v1", Sent: sent, ACKed: acked, ACKedSince: acked.At, Responses: 1, ResponseBytes: 100, ACKs: 1})
	if _, st := state(); st != status.Synced {
		t.Fatalf("ACKed what it should hold: %s, want SYNCED", st)
	}
	if got := tr.States(); got[status.Synced] != 1 || got[status.Stale] != 0 {
		t.Fatalf("counts %v, want one SYNCED", got)
	}
	s := tr.Streams()[0].Types[0]
	if *s.Sent != sent || *s.ACKed != acked || s.Expected != "v1" {
		t.Fatalf("sent %+v acked %+v expected %q; want %+v, %+v, v1", s.Sent, s.ACKed, s.Expected, sent, acked)
	}
	tr.Closed(1, t0.Add(3*time.Second))
	live.Set("cds", status.Stamps{Expected: "v2", Sent: status.Stamp{Version: "v2", At: t0.Add(4 * time.Second)}})
	live.SetGroup("other")
	if g, st := state(); g != "edge" || st != status.Synced {
		t.Fatalf("after its end: group %q, %s; want what it last said (edge, SYNCED)", g, st)
	}
}

// Totals are what the streams counted, however fed, and stay
// counted once a stream is let go (pruned or forgotten): a counter that
// fell would read as a restart.
func TestTotalsKeepWhatIsLetGo(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }, MaxGone: 1}))
	t0 := time.Now()
	for id := range uint64(3) {
		live := statustest.NewStream("edge")
		live.Set("cds", status.Stamps{Responses: 2, ResponseBytes: 10, ACKs: 1})
		tr.Attach(id, status.Info{Node: "n"}, live, t0)
		tr.Requested(id, status.Info{Node: "n"}, "cds", t0)
	}
	fed := status.Info{Node: "fed"}
	tr.Requested(9, fed, "cds", t0)
	tr.Sent(9, fed, "cds", status.Stamp{Version: "v1", At: t0}, 5, nil, nil)
	tr.ACKed(9, fed, "cds", status.Stamp{Version: "v1", At: t0})
	want := []status.Totals{{Type: "CDS", Responses: 7, ResponseBytes: 35, ACKs: 4}}
	if diff := cmp.Diff(want, tr.Totals()); diff != "" {
		t.Fatalf("totals (-want +got):\n%s", diff)
	}
	tr.Forget(0)
	tr.Closed(1, t0)
	tr.Closed(2, t0) // MaxGone 1: stream 1 is pruned
	if len(tr.Streams()) != 2 {
		t.Fatalf("%d streams kept, want 2 (the fed one and the last closed)", len(tr.Streams()))
	}
	if diff := cmp.Diff(want, tr.Totals()); diff != "" {
		t.Fatalf("totals once streams were let go (-want +got):\n%s", diff)
	}
}

// liveFill returns a tracker with n open live streams of three types each.
func liveFill(n int) *status.Tracker {
	tr := status.NewTracker(status.Options{})
	now := time.Now()
	for i := range uint64(n) {
		info := status.Info{Node: "n"}
		live := statustest.NewStream("g")
		tr.Attach(i, info, live, now)
		for _, u := range []string{"cds", "eds", "lds"} {
			tr.Requested(i, info, u, now)
			live.Set(u, status.Stamps{Expected: "v1", Sent: status.Stamp{Version: "v1", At: now}, ACKed: status.Stamp{Version: "v1", At: now}})
		}
	}
	return tr
}

// A scrape (Counts, Totals) walks the streams but allocates the same for
// 10 streams as for 1,000, however fed: a stream's stamps read through
// the Live interface once allocated per type (9.6 MB a scrape at 10,000).
func TestScrapeAllocationsIndependentOfStreams(t *testing.T) {
	for name, fill := range map[string]func(int) *status.Tracker{"fed": fill, "live": liveFill} {
		allocs := func(n int) float64 {
			tr := fill(n)
			return testing.AllocsPerRun(10, func() { tr.Counts(); tr.Totals(); tr.Harvest() })
		}
		if few, many := allocs(10), allocs(1000); few != many {
			t.Errorf("%s streams: a scrape allocates %v times at 10 streams, %v at 1,000", name, few, many)
		}
	}
}

// BenchmarkScrapeLive is BenchmarkScrape with live streams, whose stamps
// are read from them.
func BenchmarkScrapeLive(b *testing.B) {
	tr := liveFill(10_000)
	b.ReportAllocs()
	for b.Loop() {
		tr.Counts()
	}
}

// BenchmarkHarvest is what push latency costs at a read (a scrape) after
// an EDS change reached 10,000 live streams of three types each: the
// walk, and a measure for each stream's EDS. It replaces an event and a
// measure per stream on the ACK's path.
func BenchmarkHarvest(b *testing.B) {
	const streams = 10_000
	var mu sync.Mutex
	observed := 0
	tr := status.NewTracker(status.Options{OnLatency: func(string, time.Duration) { mu.Lock(); observed++; mu.Unlock() }})
	now := time.Now()
	lives := make([]*statustest.Stream, streams)
	for i := range uint64(streams) {
		info := status.Info{Node: "n"}
		lives[i] = statustest.NewStream("g")
		tr.Attach(i, info, lives[i], now)
		for _, u := range []string{"cds", "eds", "lds"} {
			tr.Requested(i, info, u, now)
			lives[i].Set(u, status.Stamps{Expected: "v0", Sent: status.Stamp{Version: "v0", At: now}, ACKed: status.Stamp{Version: "v0", At: now}})
		}
	}
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		v := fmt.Sprintf("v%d", n+1)
		at := now.Add(time.Duration(n+1) * time.Second)
		tr.Published(map[string][]string{"eds": {v}}, at)
		for _, l := range lives {
			a := status.Stamp{Version: v, At: at.Add(50 * time.Millisecond)}
			l.Set("eds", status.Stamps{Expected: v, Sent: a, ACKed: a, ACKedSince: a.At})
		}
		b.StartTimer()
		tr.Harvest()
	}
	if observed != b.N*streams {
		b.Fatalf("%d pushes measured over %d changes of %d streams", observed, b.N, streams)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streams), "ns/stream")
}

// A type's counts drop to zero when its last stream ends, rather than
// vanish: a series that vanished would keep its last value on a graph.
func TestCountsKeepTypesAtZero(t *testing.T) {
	tr := status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }})
	tr.Requested(1, status.Info{Node: "n"}, "cds", time.Now())
	tr.Closed(1, time.Now())
	want := []status.Count{{"CDS", status.Nacked, 0}, {"CDS", status.NotSent, 0}, {"CDS", status.Stale, 0}, {"CDS", status.Synced, 0}}
	if diff := cmp.Diff(want, tr.Counts()); diff != "" {
		t.Fatalf("counts once the last stream ended (-want +got):\n%s", diff)
	}
}

// A live stream's push latency is measured when read (Harvest): once per
// version it took, the newest of several taken between two reads, and
// the last as it ends; not a version accepted before it opened.
func TestHarvestMeasuresEachTakenVersionOnce(t *testing.T) {
	var told []time.Duration
	tr := status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }, OnLatency: func(_ string, d time.Duration) { told = append(told, d) }})
	t0 := time.Now()
	tr.Published(map[string][]string{"cds": {"v0"}}, t0.Add(-time.Second))
	live := statustest.NewStream("edge")
	info := status.Info{Node: "n1"}
	tr.Attach(1, info, live, t0)
	tr.Requested(1, info, "cds", t0)
	take := func(v string, accepted, ackedAt time.Duration) {
		tr.Published(map[string][]string{"cds": {v}}, t0.Add(accepted))
		a := status.Stamp{Version: v, At: t0.Add(ackedAt)}
		live.Set("cds", status.Stamps{Expected: v, Sent: a, ACKed: a, ACKedSince: a.At})
	}
	total := func() uint64 {
		l := tr.Latencies()
		if len(l) == 0 {
			return 0
		}
		return l[0].Total
	}
	take("v0", -time.Second, time.Millisecond) // the initial config: no push
	if n := total(); n != 0 {
		t.Fatalf("the initial config measured as a push: %d samples", n)
	}
	take("v1", time.Second, 1100*time.Millisecond)
	if n := total(); n != 1 || told[0] != 100*time.Millisecond {
		t.Fatalf("after one push: %d samples, told %v; want 1, [100ms]", n, told)
	}
	if n := total(); n != 1 {
		t.Fatalf("read again: %d samples, want still 1", n)
	}
	take("v2", 2*time.Second, 2200*time.Millisecond)
	take("v3", 3*time.Second, 3300*time.Millisecond)
	tr.Harvest()
	if n := total(); n != 2 || told[1] != 300*time.Millisecond {
		t.Fatalf("two pushes between reads: %d samples, told %v; want 2, the newest (300ms) last", n, told)
	}
	take("v4", 4*time.Second, 4400*time.Millisecond)
	tr.Closed(1, t0.Add(5*time.Second))
	if n := total(); n != 3 || told[2] != 400*time.Millisecond {
		t.Fatalf("a push before the stream ended: %d samples, told %v; want 3, 400ms last", n, told)
	}
}

// However a live stream ends (closed, refused, forgotten after a REST
// poll), its last push is measured as it ends: no later harvest reads it.
func TestHarvestAsTheStreamEnds(t *testing.T) {
	for name, end := range map[string]func(tr *status.Tracker, at time.Time){
		"closed":    func(tr *status.Tracker, at time.Time) { tr.Closed(1, at) },
		"refused":   func(tr *status.Tracker, at time.Time) { tr.Refused(1, status.Info{Node: "n1"}, "stalled", "", at) },
		"forgotten": func(tr *status.Tracker, _ time.Time) { tr.Forget(1) },
	} {
		t.Run(name, func(t *testing.T) {
			told := 0
			tr := status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }, OnLatency: func(string, time.Duration) { told++ }})
			t0 := time.Now()
			live := statustest.NewStream("edge")
			tr.Attach(1, status.Info{Node: "n1"}, live, t0)
			tr.Requested(1, status.Info{Node: "n1"}, "cds", t0)
			tr.Published(map[string][]string{"cds": {"v1"}}, t0.Add(time.Second))
			a := status.Stamp{Version: "v1", At: t0.Add(2 * time.Second)}
			live.Set("cds", status.Stamps{Expected: "v1", Sent: a, ACKed: a, ACKedSince: a.At})
			end(tr, t0.Add(3*time.Second))
			tr.Harvest()
			if told != 1 {
				t.Fatalf("a push before the stream ended: measured %d times, want once", told)
			}
		})
	}
}
