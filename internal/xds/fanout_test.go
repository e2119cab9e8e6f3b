package xds_test

import (
	"fmt"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// Streams in the same state share one plan per change (protocol/shared.go), yet each
// gets exactly the response that is right for it: the one assignment that
// changed, at the set's version. Under -race this also drives the shared
// state from many streams' goroutines at once.
func TestManyStreamsFollowEveryChange(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	names := []string{"a", "b", "c"}
	world := func(gen int) []any {
		return []any{
			xdstest.Cluster("a"), xdstest.Cluster("b"), xdstest.Cluster("c"),
			xdstest.Endpoints("a", 9001), xdstest.Endpoints("b", uint32(9100+gen)), xdstest.Endpoints("c", 9003),
		}
	}
	srv.Publish(t, world(0)...)
	conn := xdstest.Dial(t, srv.Addr)
	var streams []*xdstest.Stream
	for i := range 30 {
		s := xdstest.OpenADS(t, conn, xdstest.Node(fmt.Sprint("envoy-", i)))
		s.Request(cds)
		s.ACK(s.RecvType(cds))
		s.Request(eds, names...)
		if r := s.RecvType(eds); len(r.Resources) != 3 {
			t.Fatalf("stream %d: first EDS response holds %d assignments, want 3", i, len(r.Resources))
		} else {
			s.ACK(r, names...)
		}
		streams = append(streams, s)
	}
	for gen := 1; gen <= 5; gen++ {
		snap := srv.Publish(t, world(gen)...)
		want := xdstest.Endpoints("b", uint32(9100+gen))
		for i, s := range streams {
			r := s.RecvType(eds)
			if r.VersionInfo != snap.Set(eds).Version() || len(r.Resources) != 1 {
				t.Fatalf("gen %d, stream %d: version %q with %d assignments, want %q with the one that changed", gen, i, r.VersionInfo, len(r.Resources), snap.Set(eds).Version())
			}
			got := &endpointv3.ClusterLoadAssignment{}
			if err := r.Resources[0].UnmarshalTo(got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("gen %d, stream %d (-want +got):\n%s", gen, i, diff)
			}
			s.ACK(r, names...)
		}
	}
	for _, s := range streams {
		s.ExpectSilence()
	}
}
