package xds_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
)

// TestResponseSentBytes checks that the size reported to the observer (and
// so to the bytes-sent metric) is the size of what the client received,
// whether the response went out as a shared body or a one-off message.
func TestResponseSentBytes(t *testing.T) {
	sentTo := func(node, typeURL, nonce string) func(status.Event) bool {
		return func(e status.Event) bool {
			return e.Kind == status.ResponseSent && e.NodeID() == node && e.TypeURL == typeURL && e.Nonce == nonce
		}
	}
	t.Run("sotw", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "n1")
		s.Request(cds)
		r := s.RecvType(cds)
		ev := e.rec.wait(t, sentTo("n1", cds, r.Nonce))
		if want := proto.Size(r); ev.Bytes != want || want == 0 {
			t.Fatalf("reported %d bytes, client received %d", ev.Bytes, want)
		}
		if len(ev.Sent) != 2 {
			t.Fatalf("reported %d sent resources, want 2", len(ev.Sent))
		}
	})
	t.Run("delta", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.delta(t, "n1")
		s.Subscribe(cds)
		r := s.RecvType(cds)
		ev := e.rec.wait(t, sentTo("n1", cds, r.Nonce))
		if want := proto.Size(r); ev.Bytes != want || want == 0 {
			t.Fatalf("reported %d bytes, client received %d", ev.Bytes, want)
		}
		if len(ev.Sent) != 2 {
			t.Fatalf("reported %d sent resources, want 2", len(ev.Sent))
		}
	})
}

// TestSetVersionOfNamedSubscription: a client subscribed by name to part of
// a set holds a version of its own (X24), but its ResponseSent and ACK
// events carry the set's version, which is what a publish introduced and
// what push latency is measured against (without it, every gRPC client's
// push latency went unmeasured).
func TestSetVersionOfNamedSubscription(t *testing.T) {
	e := setup(t, base()...)
	s := e.ads(t, "n1")
	s.Request(eds, "a")
	r := s.RecvType(eds)
	setVersion := e.srv.Publisher.Current().For(nil).Set(eds).Version()
	if r.VersionInfo == setVersion {
		t.Fatalf("a subscription to part of the set got the set's version %s", setVersion)
	}
	sent := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.ResponseSent && ev.Nonce == r.Nonce })
	if sent.Version != r.VersionInfo || sent.SetVersion != setVersion {
		t.Fatalf("ResponseSent: version %q set version %q, want %q and %q", sent.Version, sent.SetVersion, r.VersionInfo, setVersion)
	}
	s.ACK(r, "a")
	acked := e.rec.wait(t, func(ev status.Event) bool { return ev.Kind == status.RequestACK && ev.Nonce == r.Nonce })
	if acked.Version != r.VersionInfo || acked.SetVersion != setVersion {
		t.Fatalf("RequestACK: version %q set version %q, want %q and %q", acked.Version, acked.SetVersion, r.VersionInfo, setVersion)
	}
}
