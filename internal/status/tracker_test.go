package status_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/status"
)

func TestStates(t *testing.T) {
	expected := map[string]string{"edge/cds": "v2"}
	tr := newFeed(status.NewTracker(status.Options{Expected: func(g, u string) string { return expected[g+"/"+u] }}))
	t0 := time.Now()
	info := status.Info{Node: "n"}
	state := func() string { return tr.Streams()[0].Types[0].State }

	tr.Seen(1, info, "edge", t0)
	tr.Requested(1, info, "cds", t0)
	if s := state(); s != status.NotSent {
		t.Fatalf("requested, nothing sent: %s", s)
	}
	tr.Sent(1, info, "cds", status.Stamp{Version: "v1", At: t0}, 0, nil, nil)
	if s := state(); s != status.Stale {
		t.Fatalf("sent, not ACKed: %s", s)
	}
	tr.NACKed(1, info, "cds", status.NACK{Version: "v1", Detail: "bad", At: t0.Add(time.Second)})
	if s := state(); s != status.Nacked {
		t.Fatalf("NACKed: %s", s)
	}
	tr.Sent(1, info, "cds", status.Stamp{Version: "v2", At: t0.Add(2 * time.Second)}, 0, nil, nil)
	tr.ACKed(1, info, "cds", status.Stamp{Version: "v2", At: t0.Add(3 * time.Second)})
	if s := state(); s != status.Synced {
		t.Fatalf("ACKed the latest: %s", s)
	}
	if tr.Streams()[0].Types[0].LastNACK == nil {
		t.Fatal("the NACK left the history")
	}
	// A response in flight: STALE, even before anyone says what the
	// stream should hold now.
	tr.Sent(1, info, "cds", status.Stamp{Version: "v3", At: t0.Add(4 * time.Second)}, 0, nil, nil)
	if s := state(); s != status.Stale {
		t.Fatalf("sent v3 after the ACK of v2: %s", s)
	}
	tr.ACKed(1, info, "cds", status.Stamp{Version: "v3", At: t0.Add(5 * time.Second)})
	expected["edge/cds"] = "v4" // a new config
	if s := state(); s != status.Stale {
		t.Fatalf("behind the new config: %s", s)
	}
	tr.Seen(1, info, "", t0)
	if s := state(); s != status.NotSent {
		t.Fatalf("no group: %s", s)
	}
}

func TestClosedStreamsAreBounded(t *testing.T) {
	tr := status.NewTracker(status.Options{Retention: time.Hour, MaxGone: 3})
	now := time.Now()
	for i := range uint64(10) {
		tr.Seen(i, status.Info{Node: "n"}, "g", now)
		tr.Closed(i, now)
	}
	if n := len(tr.Streams()); n != 3 {
		t.Fatalf("%d closed streams kept, want 3", n)
	}
	old := status.NewTracker(status.Options{Retention: time.Minute})
	old.Seen(1, status.Info{Node: "n"}, "g", now)
	old.Closed(1, now.Add(-2*time.Minute))
	if n := len(old.Streams()); n != 0 {
		t.Fatalf("a stream closed past the retention is still shown")
	}
}

// Push latency times changes accepted while the stream was open, from
// their acceptance; a stream's initial config is not a push.
func TestPushLatency(t *testing.T) {
	var got []time.Duration
	tr := newFeed(status.NewTracker(status.Options{OnLatency: func(_ string, d time.Duration) { got = append(got, d) }}))
	t0 := time.Now()
	tr.Seen(1, status.Info{Node: "n"}, "g", t0.Add(-time.Minute))
	tr.Published(map[string][]string{"cds": {"v1"}}, t0)
	// Each ACK harvested before the next, as reads between them would.
	for _, st := range []status.Stamp{
		{Version: "v1", At: t0.Add(150 * time.Millisecond)},
		{Version: "v1", At: t0.Add(time.Second)}, // a repeat ACK
		{Version: "unknown", At: t0},
	} {
		tr.ACKed(1, status.Info{Node: "n"}, "cds", st)
		tr.Harvest()
	}
	// A stream opened 30s after the change: its ACK is a first sync.
	tr.Seen(2, status.Info{Node: "m"}, "g", t0.Add(30*time.Second))
	tr.ACKed(2, status.Info{Node: "m"}, "cds", status.Stamp{Version: "v1", At: t0.Add(31 * time.Second)})
	tr.Harvest()
	if len(got) != 1 || got[0] != 150*time.Millisecond {
		t.Fatalf("latencies %v, want one of 150ms", got)
	}
}

// The per-(type, state) counters kept on each event agree with the states
// computed from scratch, through every kind of event, for streams that
// report their expected versions and for those that rely on their group's.
func TestCountsFollowStreams(t *testing.T) {
	group := map[string]string{}
	tr := newFeed(status.NewTracker(status.Options{Expected: func(g, u string) string { return group[u] }, MaxGone: 1}))
	rng := rand.New(rand.NewPCG(1, 2))
	urls := []string{"cds", "eds", "lds"}
	versions := []string{"v1", "v2", "v3"}
	at := time.Now()
	for step := range 5000 {
		id := uint64(rng.IntN(20))
		info := status.Info{Node: fmt.Sprint("n", id)}
		u, v := urls[rng.IntN(len(urls))], versions[rng.IntN(len(versions))]
		at = at.Add(time.Millisecond)
		switch rng.IntN(9) {
		case 0:
			tr.Seen(id, info, []string{"", "a", "b"}[rng.IntN(3)], at)
		case 1:
			tr.Requested(id, info, u, at)
		case 2:
			tr.Sent(id, info, u, status.Stamp{Version: v, At: at}, 0, nil, nil)
		case 3:
			tr.ACKed(id, info, u, status.Stamp{Version: v, At: at})
		case 4:
			tr.NACKed(id, info, u, status.NACK{Version: v, At: at})
		case 5:
			tr.Expect(id, info, u, []string{"", "v1", "v2"}[rng.IntN(3)], at)
		case 6:
			group[u] = v
			tr.Published(map[string][]string{u: {v}}, at)
		case 7:
			tr.Closed(id, at)
		case 8:
			if rng.IntN(10) == 0 {
				tr.Refused(id, info, "stalled", "", at)
			}
		}
		want := map[string]int{}
		for _, s := range tr.Streams() {
			for _, ty := range s.Types {
				if s.Gone == nil {
					want[ty.Type+" "+ty.State]++
				}
			}
		}
		got := map[string]int{}
		for _, c := range tr.Counts() {
			if c.N != 0 {
				got[c.Type+" "+c.State] = c.N
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d: counts (-recomputed +kept):\n%s", step, diff)
		}
	}
}

// fill returns a tracker with n open streams, each with three types in
// various states.
func fill(n int) *status.Tracker {
	tr := newFeed(status.NewTracker(status.Options{}))
	now := time.Now()
	for i := range uint64(n) {
		info := status.Info{Node: fmt.Sprint("n", i)}
		tr.Seen(i, info, "g", now)
		for j, u := range []string{"cds", "eds", "lds"} {
			tr.Expect(i, info, u, "v1", now)
			tr.Sent(i, info, u, status.Stamp{Version: "v1", At: now}, 0, nil, nil)
			if (int(i)+j)%3 != 0 {
				tr.ACKed(i, info, u, status.Stamp{Version: "v1", At: now})
			}
		}
	}
	return tr.Tracker
}

// BenchmarkScrape is what a metrics scrape costs the tracker at 100 and
// 10,000 streams.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprint(n, "streams"), func(b *testing.B) {
			tr := fill(n)
			b.ReportAllocs()
			for b.Loop() {
				tr.Counts()
			}
		})
	}
}

// A refused stream shows as gone with its reason, whether it was open
// (then its Closed changes nothing) or refused at its first request; and
// the kept detail is bounded.
func TestRefused(t *testing.T) {
	tr := status.NewTracker(status.Options{Retention: time.Hour})
	now := time.Now()
	open := status.Info{Node: "edge-1", Identity: "spiffe://example.org/ns/edge/sa/edge-1"}
	tr.Seen(1, open, "edge", now)
	tr.Refused(1, open, "stalled", "a response stayed unsent", now)
	tr.Closed(1, now.Add(time.Second))
	tr.Refused(2, status.Info{Node: "edge-1", Identity: "spiffe://example.org/ns/edge/sa/edge-2"}, "identity_mismatch", string(make([]byte, 1<<20)), now)

	got := tr.Streams()
	if len(got) != 2 {
		t.Fatalf("%d streams, want 2", len(got))
	}
	a, b := got[0], got[1]
	if a.Refused == nil || a.Refused.Reason != "stalled" || a.Gone == nil || !a.Gone.Equal(now) || a.Identity != open.Identity || a.Group != "edge" {
		t.Fatalf("stream refused while open: %+v (refused %+v)", a, a.Refused)
	}
	if b.Refused == nil || b.Refused.Reason != "identity_mismatch" || b.Gone == nil || b.Group != status.NoGroup || len(b.Refused.Detail) > 5000 {
		t.Fatalf("stream refused at open: refused %v, gone %v, group %q", b.Refused != nil, b.Gone, b.Group)
	}
	if n := tr.States(); n[status.Synced]+n[status.Stale]+n[status.Nacked]+n[status.NotSent] != 0 {
		t.Fatalf("refused streams counted as open: %v", n)
	}

	// What a client sent is kept bounded, whatever the feeder passed on.
	huge := string(make([]byte, 3<<20))
	tr.Refused(3, status.Info{Node: huge, Cluster: huge, Agent: huge, AgentVersion: huge}, "bad_node", "", now)
	for _, s := range tr.Streams() {
		if s.ID == 3 && (len(s.Node) > 5000 || len(s.Cluster) > 5000 || len(s.Client) > 5000) {
			t.Fatalf("kept %d, %d and %d bytes of a refused node's id, cluster and client", len(s.Node), len(s.Cluster), len(s.Client))
		}
	}
}

// A stream from which some Secrets are withheld is SYNCED when it holds
// what it may have, not its group's version; STALE once that changes.
func TestExpectedOverride(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{Expected: func(g, u string) string { return "group-v" }}))
	now := time.Now()
	info := status.Info{Node: "n"}
	tr.Seen(1, info, "edge", now)
	tr.Expect(1, info, "sds", "withheld-v", now)
	tr.Sent(1, info, "sds", status.Stamp{Version: "withheld-v", At: now}, 0, nil, nil)
	tr.ACKed(1, info, "sds", status.Stamp{Version: "withheld-v", At: now})
	tr.ACKed(1, info, "cds", status.Stamp{Version: "group-v", At: now})
	tr.Sent(1, info, "cds", status.Stamp{Version: "group-v", At: now}, 0, nil, nil)
	states := func() map[string]string {
		out := map[string]string{}
		for _, ty := range tr.Streams()[0].Types {
			out[ty.Type] = ty.State
		}
		return out
	}
	if got := states(); got["sds"] != status.Synced || got["cds"] != status.Synced {
		t.Fatalf("states %v, want both SYNCED", got)
	}
	tr.Expect(1, info, "sds", "", now) // its group's again
	if got := states(); got["sds"] != status.Stale {
		t.Fatalf("sds %s once the group's version is expected, want STALE", got["sds"])
	}
}

// Events for different streams come from many goroutines at once (the xds
// server's, on every core) while pages and scrapes read: nothing races
// (under -race), the counts add up to the open streams,
// and the closed ones kept stay within MaxGone.
func TestTrackerConcurrentStreams(t *testing.T) {
	tr := newFeed(status.NewTracker(status.Options{MaxGone: 50, Retention: time.Hour}))
	const feeders, per = 8, 300
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.Streams()
			tr.Counts()
			tr.Propagation()
			tr.Published(map[string][]string{"u1": {fmt.Sprint("v", n)}}, time.Now())
		}
	})
	var feed sync.WaitGroup
	for f := range feeders {
		feed.Go(func() {
			for i := range per {
				id := uint64(f*per + i + 1)
				info, now := status.Info{Node: fmt.Sprint("n", id)}, time.Now()
				tr.Seen(id, info, "g", now)
				tr.Requested(id, info, "u1", now)
				tr.ExpectOf(id, info, "u1", "v1", "", now)
				tr.Sent(id, info, "u1", status.Stamp{Version: "v1", Nonce: "1", At: now}, 0, nil, nil)
				tr.ACKed(id, info, "u1", status.Stamp{Version: "v1", Nonce: "1", At: now})
				switch i % 6 {
				case 0:
					tr.Closed(id, now)
				case 1:
					tr.Forget(id)
				}
			}
		})
	}
	feed.Wait()
	close(stop)
	readers.Wait()
	open, gone := 0, 0
	for _, s := range tr.Streams() {
		if s.Gone != nil {
			gone++
			continue
		}
		open++
		if len(s.Types) != 1 || s.Types[0].State != status.Synced {
			t.Fatalf("stream %d: %+v, want u1 SYNCED", s.ID, s.Types)
		}
	}
	if want := feeders * per * 4 / 6; open != want {
		t.Errorf("%d open streams, want %d", open, want)
	}
	if gone != 50 {
		t.Errorf("%d closed streams kept, want MaxGone (50)", gone)
	}
	var counts []status.Count
	for _, c := range tr.Counts() {
		if c.N != 0 {
			counts = append(counts, c)
		}
	}
	if len(counts) != 1 || counts[0] != (status.Count{Type: "u1", State: status.Synced, N: open}) {
		t.Errorf("counts %+v, want u1 SYNCED %d", counts, open)
	}
}
