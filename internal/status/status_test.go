package status

import (
	"testing"
	"time"
)

func TestStates(t *testing.T) {
	expected := map[string]string{"edge/cds": "v2"}
	tr := NewTracker(Options{Expected: func(g, u string) string { return expected[g+"/"+u] }})
	t0 := time.Now()
	info := Info{Node: "n"}
	state := func() string { return tr.Streams()[0].Types[0].State }

	tr.Seen(1, info, "edge", t0)
	tr.Requested(1, info, "cds", t0)
	if s := state(); s != NotSent {
		t.Fatalf("requested, nothing sent: %s", s)
	}
	tr.Sent(1, info, "cds", Stamp{Version: "v1", At: t0}, nil, nil)
	if s := state(); s != Stale {
		t.Fatalf("sent, not ACKed: %s", s)
	}
	tr.NACKed(1, info, "cds", NACK{Version: "v1", Detail: "bad", At: t0.Add(time.Second)})
	if s := state(); s != Nacked {
		t.Fatalf("NACKed: %s", s)
	}
	tr.Sent(1, info, "cds", Stamp{Version: "v2", At: t0.Add(2 * time.Second)}, nil, nil)
	tr.ACKed(1, info, "cds", Stamp{Version: "v2", At: t0.Add(3 * time.Second)})
	if s := state(); s != Synced {
		t.Fatalf("ACKed the latest: %s", s)
	}
	if tr.Streams()[0].Types[0].LastNACK == nil {
		t.Fatal("the NACK left the history")
	}
	expected["edge/cds"] = "v3" // a new config
	if s := state(); s != Stale {
		t.Fatalf("behind the new config: %s", s)
	}
	tr.Seen(1, info, "", t0)
	if s := state(); s != NotSent {
		t.Fatalf("no group: %s", s)
	}
}

func TestClosedStreamsAreBounded(t *testing.T) {
	tr := NewTracker(Options{Retention: time.Hour, MaxGone: 3})
	now := time.Now()
	for i := range uint64(10) {
		tr.Seen(i, Info{Node: "n"}, "g", now)
		tr.Closed(i, now)
	}
	if n := len(tr.Streams()); n != 3 {
		t.Fatalf("%d closed streams kept, want 3", n)
	}
	old := NewTracker(Options{Retention: time.Minute})
	old.Seen(1, Info{Node: "n"}, "g", now)
	old.Closed(1, now.Add(-2*time.Minute))
	if n := len(old.Streams()); n != 0 {
		t.Fatalf("a stream closed past the retention is still shown")
	}
}

func TestPushLatency(t *testing.T) {
	var got []time.Duration
	tr := NewTracker(Options{OnLatency: func(_ string, d time.Duration) { got = append(got, d) }})
	t0 := time.Now()
	tr.Published(map[string][]string{"cds": {"v1"}}, t0)
	tr.ACKed(1, Info{Node: "n"}, "cds", Stamp{Version: "v1", At: t0.Add(150 * time.Millisecond)})
	tr.ACKed(1, Info{Node: "n"}, "cds", Stamp{Version: "v1", At: t0.Add(time.Second)}) // a repeat ACK
	tr.ACKed(1, Info{Node: "n"}, "cds", Stamp{Version: "unknown", At: t0})
	if len(got) != 1 || got[0] != 150*time.Millisecond {
		t.Fatalf("latencies %v, want one of 150ms", got)
	}
}

// A refused stream shows as gone with its reason, whether it was open
// (then its Closed changes nothing) or refused at its first request; and
// the kept detail is bounded.
func TestRefused(t *testing.T) {
	tr := NewTracker(Options{Retention: time.Hour})
	now := time.Now()
	open := Info{Node: "edge-1", Identity: "spiffe://example.org/ns/edge/sa/edge-1"}
	tr.Seen(1, open, "edge", now)
	tr.Refused(1, open, "stalled", "a response stayed unsent", now)
	tr.Closed(1, now.Add(time.Second))
	tr.Refused(2, Info{Node: "edge-1", Identity: "spiffe://example.org/ns/edge/sa/edge-2"}, "identity_mismatch", string(make([]byte, 1<<20)), now)

	got := tr.Streams()
	if len(got) != 2 {
		t.Fatalf("%d streams, want 2", len(got))
	}
	a, b := got[0], got[1]
	if a.Refused == nil || a.Refused.Reason != "stalled" || a.Gone == nil || !a.Gone.Equal(now) || a.Identity != open.Identity || a.Group != "edge" {
		t.Fatalf("stream refused while open: %+v (refused %+v)", a, a.Refused)
	}
	if b.Refused == nil || b.Refused.Reason != "identity_mismatch" || b.Gone == nil || b.Group != NoGroup || len(b.Refused.Detail) > 5000 {
		t.Fatalf("stream refused at open: refused %v, gone %v, group %q", b.Refused != nil, b.Gone, b.Group)
	}
	if n := tr.States(); n[Synced]+n[Stale]+n[Nacked]+n[NotSent] != 0 {
		t.Fatalf("refused streams counted as open: %v", n)
	}
}

// A stream from which some Secrets are withheld is SYNCED when it holds
// what it may have, not its group's version; STALE once that changes.
func TestExpectedOverride(t *testing.T) {
	tr := NewTracker(Options{Expected: func(g, u string) string { return "group-v" }})
	now := time.Now()
	info := Info{Node: "n"}
	tr.Seen(1, info, "edge", now)
	tr.Expect(1, info, "sds", "withheld-v", now)
	tr.Sent(1, info, "sds", Stamp{Version: "withheld-v", At: now}, nil, nil)
	tr.ACKed(1, info, "sds", Stamp{Version: "withheld-v", At: now})
	tr.ACKed(1, info, "cds", Stamp{Version: "group-v", At: now})
	tr.Sent(1, info, "cds", Stamp{Version: "group-v", At: now}, nil, nil)
	states := func() map[string]string {
		out := map[string]string{}
		for _, ty := range tr.Streams()[0].Types {
			out[ty.Type] = ty.State
		}
		return out
	}
	if got := states(); got["sds"] != Synced || got["cds"] != Synced {
		t.Fatalf("states %v, want both SYNCED", got)
	}
	tr.Expect(1, info, "sds", "", now) // its group's again
	if got := states(); got["sds"] != Stale {
		t.Fatalf("sds %s once the group's version is expected, want STALE", got["sds"])
	}
}
