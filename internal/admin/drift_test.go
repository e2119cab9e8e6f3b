package admin

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/status/statustest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Drift compares a state-of-the-world Listener or Cluster set with what
// the stream subscribes to: a proxyless gRPC client that asks for its own
// clusters by name does not miss the group's others; a wildcard stream
// does, and so does a named one that lacks a name it asked for.
func TestDriftFollowsTheSubscription(t *testing.T) {
	reg := xdstype.New()
	snap := xdstest.Snapshot(t, reg, xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("c"),
		xdstest.Endpoints("a", 80), xdstest.Endpoints("b", 80), xdstest.Endpoints("c", 80))
	f := fleet.NewFleet(snap, time.Now())
	for _, tc := range []struct {
		name     string
		wildcard bool
		names    []string
		sent     []string
		missing  []string
	}{
		{name: "named, holds all it asked for", names: []string{"a"}, sent: []string{"a"}, missing: []string{}},
		{name: "named, a name the group lacks", names: []string{"a", "nope"}, sent: []string{"a"}, missing: []string{}},
		{name: "named, lacks one", names: []string{"b", "a"}, sent: []string{"a"}, missing: []string{"b"}},
		{name: "wildcard", wildcard: true, sent: []string{"a"}, missing: []string{"b", "c"}},
		{name: "wildcard and a name", wildcard: true, names: []string{"a"}, sent: []string{"a", "b"}, missing: []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := status.NewTracker(status.Options{Abbrev: func(string) string { return "CDS" }})
			fd := statustest.New(tr)
			info := status.Info{Node: "grpc-client", Kind: "ADS"}
			fd.Seen(1, info, fleet.DefaultGroup, time.Now())
			tr.Subscribed(1, info, xdstype.ClusterURL, tc.wildcard, tc.names, time.Now())
			var sent []proto.Message
			for _, n := range tc.sent {
				sent = append(sent, xdstest.Cluster(n))
			}
			fd.Sent(1, info, xdstype.ClusterURL, status.Stamp{Version: "v1", At: time.Now()}, 0, sent, nil)
			got := drift(reg, f, tr.Streams()[0])
			if len(got) != 1 {
				t.Fatalf("drift %+v, want one type", got)
			}
			if d := cmp.Diff(tc.missing, got[0].Missing); d != "" {
				t.Errorf("missing (-want +got):\n%s", d)
			}
		})
	}
}
