package xds_test

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// A stream keeps its own status, which status reads on demand: after a
// response and its ACK, the stream's StreamStatus holds exactly what was
// sent and ACKed, and what the client should hold. The type's first sync
// is reported once (TypeSynced), and the first ACK of a version once
// (VersionTaken), a repeated ACK not.
func TestStreamStatus(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		r := s.RecvType(cds)
		s.ACK(r)
		ack := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.Nonce == r.Nonce })
		checkStatus(t, e, ack, r.VersionInfo, r.Nonce)
		s.ACK(r) // the same again: not taken again
		e.rec.wait(t, func(ev status.Event) bool {
			return ev.Kind == status.RequestACK && ev.Nonce == r.Nonce && !ev.At.Equal(ack.At)
		})
		checkOnce(t, e, ack.StreamID)
	})
	t.Run("delta", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		r := s.RecvType(cds)
		s.ACK(r)
		ack := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.Nonce == r.Nonce })
		checkStatus(t, e, ack, ack.Version, r.Nonce)
	})
}

// checkStatus checks the status an ACK of nonce, at version, left, and
// the events that said the type was taken and synced.
func checkStatus(t *testing.T, e *env, ack status.Event, version, nonce string) {
	t.Helper()
	if ack.Status == nil {
		t.Fatal("the ACK event carries no StreamStatus")
	}
	taken := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.VersionTaken && ev.StreamID == ack.StreamID })
	if taken.TypeURL != cds || taken.Version != version || !taken.At.Equal(ack.At) || taken.Opened.IsZero() || taken.Opened.After(taken.At) {
		t.Fatalf("VersionTaken %s %s at %v (stream opened %v), want %s %s at the ACK's %v", taken.TypeURL, taken.Version, taken.At, taken.Opened, cds, version, ack.At)
	}
	synced := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.TypeSynced && ev.StreamID == ack.StreamID })
	if synced.TypeURL != cds || synced.FirstSync <= 0 || !synced.At.Equal(ack.At) {
		t.Fatalf("TypeSynced %s after %v at %v, want %s after a while, at the ACK's %v", synced.TypeURL, synced.FirstSync, synced.At, cds, ack.At)
	}
	var ts status.Stamps
	if !ack.Status.Stamps(cds, &ts) {
		t.Fatal("no status of CDS")
	}
	if ts.Sent.Version != version || ts.Sent.Nonce != nonce || ts.Sent.Resources != 2 || ts.Sent.At.IsZero() {
		t.Fatalf("sent %+v, want version %s nonce %s with 2 resources", ts.Sent, version, nonce)
	}
	if ts.ACKed.Version != version || ts.ACKed.Nonce != nonce || !ts.ACKed.At.Equal(ack.At) || !ts.ACKedSince.Equal(ack.At) {
		t.Fatalf("acked %+v since %v, want version %s nonce %s at %v", ts.ACKed, ts.ACKedSince, version, nonce, ack.At)
	}
	if ts.Expected != version || len(ts.LastSent) != 2 {
		t.Fatalf("expected %q and %d sent, want %q and 2", ts.Expected, len(ts.LastSent), version)
	}
	if g := ack.Status.Group(); g == "" {
		t.Fatal("the stream's status names no group")
	}
	if ack.Status.Stamps(lds, &ts) {
		t.Fatal("a status of LDS, which the stream never asked for")
	}
}

// checkOnce checks that stream id reported one VersionTaken and one
// TypeSynced.
func checkOnce(t *testing.T, e *env, id uint64) {
	t.Helper()
	for _, k := range []status.EventKind{status.VersionTaken, status.TypeSynced} {
		if n := e.rec.count(func(ev status.Event) bool { return ev.Kind == k && ev.StreamID == id }); n != 1 {
			t.Fatalf("%d events of kind %d, want 1", n, k)
		}
	}
}

// picky is a recorder that wants none of the per-change events.
type picky struct{ *recorder }

func (picky) Wants(status.EventKind) bool { return false }

// A Selective observer that wants none of the per-change events gets none
// (no expected version, response, ACK or version taken), while the
// stream's status still follows the exchange and the other events come:
// the type's first sync, and a NACK.
func TestSelectiveObserver(t *testing.T) {
	for _, delta := range []bool{false, true} {
		rec := picky{newRecorder()}
		srv := xdstest.Start(t, xds.Options{Observer: rec})
		srv.Publish(t, base()...)
		conn := xdstest.Dial(t, srv.Addr)
		if delta {
			s := xdstest.OpenDeltaADS(t, conn, xdstest.Node("n1"))
			s.Subscribe(cds)
			s.ACK(s.RecvType(cds))
		} else {
			s := xdstest.OpenADS(t, conn, xdstest.Node("n1"))
			s.Request(cds)
			s.ACK(s.RecvType(cds))
		}
		synced := rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.TypeSynced })
		var ts status.Stamps
		if synced.Status == nil || !synced.Status.Stamps(cds, &ts) || ts.ACKed.At.IsZero() || ts.Responses != 1 || ts.ACKs != 1 {
			t.Fatalf("delta %v: the stream's status after its ACK: %+v", delta, ts)
		}
		for _, k := range []status.EventKind{status.ExpectedVersion, status.ResponseSent, status.RequestACK, status.VersionTaken} {
			if n := rec.count(func(ev status.Event) bool { return ev.Kind == k }); n != 0 {
				t.Errorf("delta %v: %d events of kind %d, which the observer does not want", delta, n, k)
			}
		}
		for _, k := range []status.EventKind{status.StreamOpened, status.Subscribed} {
			if n := rec.count(func(ev status.Event) bool { return ev.Kind == k }); n != 1 {
				t.Errorf("delta %v: %d events of kind %d, want 1", delta, n, k)
			}
		}
	}
}

// A type ACKed while its stream is in no group is synced once the stream
// is in a group again, with nothing more sent or ACKed: its first sync is
// reported then (it used to wait for the next write, if any).
func TestFirstSyncAfterRegroup(t *testing.T) {
	edge := nodegroup.Groups{{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}}}
	other := nodegroup.Groups{{Name: "other", Match: nodegroup.Match{ID: "other-*"}}}
	world := []any{xdstest.Cluster("web"), xdstest.Endpoints("web", 1)}
	e := setup(t)
	publishGroups(t, e.srv, edge, world)
	s := e.ads(t, "edge-1")
	s.Request(cds)
	r := s.RecvType(cds)
	publishGroups(t, e.srv, other, world)
	e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.NoMatchingGroup })
	s.ACK(r)
	ack := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.Nonce == r.Nonce })
	if n := e.rec.count(func(ev status.Event) bool { return ev.Kind == status.TypeSynced }); n != 0 {
		t.Fatalf("%d first syncs reported in no group", n)
	}
	publishGroups(t, e.srv, edge, world)
	synced := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.TypeSynced })
	if synced.TypeURL != cds || synced.StreamID != ack.StreamID || synced.FirstSync <= 0 {
		t.Fatalf("TypeSynced %s on stream %d after %v; want CDS on %d", synced.TypeURL, synced.StreamID, synced.FirstSync, ack.StreamID)
	}
}
