package xds_test

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// These tests each guard a behaviour that could be broken without any
// other test noticing (issue 15, item 5); each names the breakage it
// catches.

// quietFleets serves the publisher's newest fleet but never wakes a
// stream: a publish stays unpushed until something else makes the stream
// look, as when a request arrives before the stream's wake-up is handled.
type quietFleets struct{ pub *fleet.Publisher }

func (q quietFleets) Current() *fleet.Fleet { return q.pub.Current() }

func (q quietFleets) Notify(func()) func() { return func() {} }

// Breakage caught: request() answering from the newest fleet without first
// pushing what that fleet changed in the types the client already holds.
func TestSotW_X40_publish_not_pushed_goes_before_a_later_answer(t *testing.T) {
	pub := fleet.NewPublisher()
	srv := xdstest.Start(t, xds.Options{Fleets: quietFleets{pub}})
	publish := func(msgs ...any) {
		pub.Publish(fleet.NewFleet(xdstest.Snapshot(t, srv.Registry, msgs...), time.Now()))
	}
	publish(base()...)
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("n1"))
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	s.ExpectSilence()
	// Cluster c is published; the stream is not woken for it. The next
	// request, for another type, must not be answered before c is pushed.
	publish(with(xdstest.Cluster("c"), xdstest.Endpoints("c", 1003))...)
	s.Request(lds, "l1")
	first := s.Recv()
	if first.TypeUrl != cds {
		t.Fatalf("the answer for %s overtook the publish of cluster c: first response %s", lds, first.TypeUrl)
	}
	wantNames(t, first, "a", "b", "c")
	wantNames(t, s.RecvType(lds), "l1")
}

// Breakage caught: the forced resend of a newly named resource dropped
// (subscribe() no longer marking it, or response() ignoring the mark). The
// client holds r1 through the wildcard; naming it is a new subscription to
// it, answered with it (X17), not with an empty response (X22).
func TestSotW_X17_named_after_wildcard_is_sent(t *testing.T) {
	e := setup(t, base()...)
	s := e.ads(t, "n1")
	s.Request(rds, "*")
	r := s.RecvType(rds)
	wantNames(t, r, "r1")
	s.ACK(r, "r1") // the wildcard dropped, r1 named
	again := s.RecvType(rds)
	wantNames(t, again, "r1")
	if again.VersionInfo == "" || again.Nonce == r.Nonce {
		t.Fatalf("response %v", again)
	}
}

// Breakage caught: subscribe() no longer dropping an unsubscribed name
// from what the stream believes the client holds. The client dropped "b"
// (X16); the server must not go on refreshing its TTL as if the client
// held it: a heartbeat names only what the client holds (X41). (With the
// filtering gone, X17's resend still works through the forced resend: this
// is what catches it.)
func TestSotW_X17_X41_unsubscribed_name_no_longer_held(t *testing.T) {
	e := setup(t, with(xdstest.TTL{Message: xdstest.Runtime("flag", "k", 1), TTL: 200 * time.Millisecond},
		xdstest.TTL{Message: xdstest.Runtime("flag2", "k", 2), TTL: 200 * time.Millisecond})...)
	s := xdstest.OpenADS(t, e.conn, nodeWith("envoy", featTTL, featWrap))
	s.Request(rtds, "flag", "flag2")
	r := s.RecvType(rtds)
	if len(r.Resources) != 2 {
		t.Fatalf("%d resources, want flag and flag2", len(r.Resources))
	}
	s.ACK(r, "flag") // flag2 unsubscribed: no response owed for a per-resource type
	for i := range 3 {
		hb := s.RecvType(rtds)
		if got := heartbeatNames(t, hb); len(got) != 1 || got[0] != "flag" {
			t.Fatalf("heartbeat %d refreshes %v; want only flag, which the client holds", i, got)
		}
		s.ACK(hb, "flag")
	}
}

// heartbeatNames returns the names in a SotW heartbeat (Resource-wrapped,
// without payload), failing on anything else.
func heartbeatNames(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range resp.Resources {
		var res discoveryv3.Resource
		if err := a.UnmarshalTo(&res); err != nil || res.Resource != nil || res.Ttl == nil {
			t.Fatalf("not a heartbeat: %v (%v)", a, err)
		}
		out = append(out, res.Name)
	}
	return out
}

// Breakage caught: heartbeat() refreshing a TTL without checking that the
// client holds the set's version of the resource: one it does not
// subscribe to, or one whose current version it rejected. A heartbeat
// names the version the client holds (X41); Envoy takes a payload-less
// resource at another version as an update without its resource, not as
// a refresh.
func TestSotW_X41_heartbeats_only_for_versions_held(t *testing.T) {
	flag := func(v float64) xdstest.TTL {
		return xdstest.TTL{Message: xdstest.Runtime("flag", "k", v), TTL: 200 * time.Millisecond}
	}
	other := xdstest.TTL{Message: xdstest.Runtime("other", "k", 1), TTL: 200 * time.Millisecond}
	e := setup(t, with(flag(1), other)...)
	s := xdstest.OpenADS(t, e.conn, nodeWith("envoy", featTTL, featWrap))
	s.Request(rtds, "flag")
	v1 := s.RecvType(rtds)
	s.ACK(v1, "flag")
	hb := s.RecvType(rtds)
	if got := heartbeatNames(t, hb); len(got) != 1 || got[0] != "flag" || hb.VersionInfo != v1.VersionInfo {
		t.Fatalf("heartbeat refreshes %v at %q; want flag at %q (not other, which the client does not subscribe to)", got, hb.VersionInfo, v1.VersionInfo)
	}
	s.ACK(hb, "flag")
	// The client rejects flag's next version: it keeps running v1.
	e.srv.Publish(t, with(flag(2), other)...)
	v2 := s.RecvType(rtds)
	s.NACK(v2, v1.VersionInfo, "rejected", "flag")
	// No heartbeat claims v2; within three TTL periods, none at all or
	// only v1's.
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		r, err := s.NextWithin(time.Until(deadline))
		if err != nil {
			break
		}
		if r.VersionInfo == v2.VersionInfo {
			t.Fatalf("heartbeat for version %s, which the client rejected (it holds %s)", v2.VersionInfo, v1.VersionInfo)
		}
		s.ACK(r, "flag")
	}
}

// The same for delta: heartbeats() refreshing a TTL at a version the
// client does not hold (never subscribed, or rejected).
func TestDelta_X41_heartbeats_only_for_versions_held(t *testing.T) {
	flag := func(v float64) xdstest.TTL {
		return xdstest.TTL{Message: xdstest.Runtime("flag", "k", v), TTL: 200 * time.Millisecond}
	}
	other := xdstest.TTL{Message: xdstest.Runtime("other", "k", 1), TTL: 200 * time.Millisecond}
	e := setup(t, with(flag(1), other)...)
	s := xdstest.OpenDeltaADS(t, e.conn, nodeWith("envoy", featTTL))
	s.Subscribe(rtds, "flag")
	v1 := s.RecvType(rtds)
	s.ACK(v1)
	hb := s.RecvType(rtds)
	if len(hb.Resources) != 1 || hb.Resources[0].Name != "flag" || hb.Resources[0].Version != versions(v1)["flag"] || hb.Resources[0].Resource != nil {
		t.Fatalf("heartbeat %v; want flag at %s, without payload (not other, which the client does not subscribe to)", hb.Resources, versions(v1)["flag"])
	}
	s.ACK(hb)
	e.srv.Publish(t, with(flag(2), other)...)
	v2 := s.RecvType(rtds)
	s.NACK(v2, "rejected")
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		r, err := s.NextWithin(time.Until(deadline))
		if err != nil {
			break
		}
		for _, res := range r.Resources {
			if res.Resource == nil && res.Version == versions(v2)["flag"] {
				t.Fatalf("heartbeat for version %s, which the client rejected (it holds %s)", res.Version, versions(v1)["flag"])
			}
		}
		s.ACK(r)
	}
}

// Breakage caught: a delta wildcard client's unsubscription of a name it
// still has through "*" making the server forget it holds it (X31), or
// subscribing to a name ending an explicit wildcard (X32, only the legacy
// one ends): either way the next change brings back what the client
// already has, or nothing.
func TestDelta_X31_X32_wildcard_keeps_what_it_holds(t *testing.T) {
	bChanged := func() []any {
		b := xdstest.Cluster("b")
		b.ConnectTimeout.Seconds = 7
		return []any{xdstest.Cluster("a"), b, xdstest.Endpoints("a", 1001), xdstest.Endpoints("b", 1002), xdstest.APIListener("l1", "r1"), xdstest.Route("r1", "a")}
	}
	t.Run("X31_unsubscribed_name_still_held", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds, "*", "a")
		s.ACK(s.RecvType(cds))
		s.Unsubscribe(cds, "a")
		s.ExpectSilence()
		// Only b changes: the response holds b alone; a, unchanged and
		// held through the wildcard, is not resent.
		e.srv.Publish(t, bChanged()...)
		wantDelta(t, s.RecvType(cds), []string{"b"}, nil)
	})
	t.Run("X32_name_added_to_explicit_wildcard", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds, "*")
		s.ACK(s.RecvType(cds))
		s.Subscribe(cds, "a")
		r := s.RecvType(cds)
		wantDelta(t, r, []string{"a"}, nil) // answered even if held (X29)
		s.ACK(r)
		e.srv.Publish(t, bChanged()...)
		wantDelta(t, s.RecvType(cds), []string{"b"}, nil)
	})
}
