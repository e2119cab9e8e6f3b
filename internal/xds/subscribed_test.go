package xds_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// subscriptions returns the SubscriptionChanged events of node's streams
// for typeURL so far, as "wildcard names".
func subscriptions(r *recorder, node, typeURL string) []string {
	var out []string
	for _, e := range r.all() {
		if e.Kind == status.SubscriptionChanged && e.NodeID() == node && e.TypeURL == typeURL {
			out = append(out, fmt.Sprint(e.Wildcard, " ", e.Names))
		}
	}
	return out
}

// What each stream subscribes to is reported when it changes, not on
// requests that leave it (ACKs repeating the names): status tells a
// proxy that lacks a resource from one that never asked for it.
func TestSubscriptionChangedReported(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		e := setup(t, base()...)
		s := e.ads(t, "grpc")
		s.Request(cds, "b", "a")
		s.ACK(s.RecvType(cds), "a", "b")
		s.Request(cds, "a")
		s.ACK(s.RecvType(cds), "a")
		s.Request(lds)
		s.ACK(s.RecvType(lds))
		// A probe answered in order: every event of the requests above
		// was reported before it.
		s.ExpectSilence()
		if got, want := subscriptions(e.rec, "grpc", cds), []string{"false [a b]", "false [a]"}; !slices.Equal(got, want) {
			t.Fatalf("CDS subscriptions reported %q, want %q", got, want)
		}
		if got, want := subscriptions(e.rec, "grpc", lds), []string{"true []"}; !slices.Equal(got, want) {
			t.Fatalf("LDS subscriptions reported %q, want %q (the legacy wildcard)", got, want)
		}
	})
	t.Run("delta", func(t *testing.T) {
		e := setup(t, base()...)
		d := xdstest.OpenDeltaADS(t, e.conn, xdstest.Node("envoy"))
		d.Subscribe(cds, "a")
		d.ACK(d.RecvType(cds))
		d.Subscribe(cds, "b")
		d.ACK(d.RecvType(cds))
		d.Unsubscribe(cds, "a")
		d.Subscribe(eds, "b")
		d.ACK(d.RecvType(eds))
		d.ExpectSilence()
		if got, want := subscriptions(e.rec, "envoy", cds), []string{"false [a]", "false [a b]", "false [b]"}; !slices.Equal(got, want) {
			t.Fatalf("CDS subscriptions reported %q, want %q", got, want)
		}
		// Assignments are per resource: never compared, not reported.
		if got := subscriptions(e.rec, "envoy", eds); len(got) != 0 {
			t.Fatalf("EDS subscriptions reported %q, want none", got)
		}
	})
}
