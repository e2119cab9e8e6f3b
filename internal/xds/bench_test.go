package xds_test

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// fleetObjects is n EDS clusters with 10-endpoint assignments; gen makes each
// generation's clusters differ.
func fleetObjects(n, gen int) []proto.Message {
	var out []proto.Message
	for i := range n {
		name := fmt.Sprintf("service-%04d", i)
		c := xdstest.Cluster(name)
		c.ConnectTimeout.Seconds = int64(1 + gen%2)
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		ports := make([]uint32, 10)
		for j := range ports {
			ports[j] = uint32(10000 + 100*(gen%2) + j)
		}
		out = append(out, c, xdstest.Endpoints(name, ports...))
	}
	return out
}

// BenchmarkSendSnapshotToOneStream measures delivering a changed snapshot
// of 1,000 clusters and 1,000 assignments to one ADS stream over loopback
// gRPC: the push, the server's send of both responses, and the client's
// receipt and ACK.
func BenchmarkSendSnapshotToOneStream(b *testing.B) {
	srv := xdstest.Start(b, xds.Options{})
	snaps := []*snapshot.Snapshot{
		xdstest.Snapshot(b, srv.Registry, fleetObjects(1000, 0)),
		xdstest.Snapshot(b, srv.Registry, fleetObjects(1000, 1)),
	}
	srv.Publisher.Publish(fleet.NewFleet(snaps[0], time.Now()))
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("service-%04d", i)
	}
	s := xdstest.OpenADS(b, xdstest.Dial(b, srv.Addr), xdstest.Node("bench"))
	s.Request(cds)
	s.RecvType(cds)
	s.Request(cds)
	s.Request(eds, names...)
	s.RecvType(eds)
	s.Request(eds, names...)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		srv.Publisher.Publish(fleet.NewFleet(snaps[i%2], time.Now()))
		c := s.RecvType(cds)
		e := s.RecvType(eds)
		if len(c.Resources) != 1000 || len(e.Resources) != 1000 {
			b.Fatalf("got %d clusters, %d assignments", len(c.Resources), len(e.Resources))
		}
		s.Request(cds)
		s.Request(eds, names...)
	}
}

// oneEndpointChange is 1,000 clusters with 10-endpoint assignments where
// only service-0000's first endpoint differs between gen 0 and gen 1.
func oneEndpointChange(gen int) []proto.Message {
	out := fleetObjects(1000, 0)
	ports := make([]uint32, 10)
	for j := range ports {
		ports[j] = uint32(10000 + j)
	}
	ports[0] += uint32(gen % 2)
	out[1] = xdstest.Endpoints("service-0000", ports...)
	return out
}

// BenchmarkEndpointChangeWireBytes measures the bytes one client receives
// for one endpoint change in a snapshot of 1,000 clusters, subscribed to
// every cluster and assignment: state of the world versus delta. The
// figure is the protobuf size of the responses plus gRPC's 5-byte message
// header, per change.
func BenchmarkEndpointChangeWireBytes(b *testing.B) {
	// A benchmark loop asks as fast as it can: not a flood to cut off.
	srv := xdstest.Start(b, xds.Options{MaxRequestsPerSecond: -1})
	snaps := []*snapshot.Snapshot{
		xdstest.Snapshot(b, srv.Registry, oneEndpointChange(0)),
		xdstest.Snapshot(b, srv.Registry, oneEndpointChange(1)),
	}
	srv.Publisher.Publish(fleet.NewFleet(snaps[0], time.Now()))
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("service-%04d", i)
	}
	conn := xdstest.Dial(b, srv.Addr)
	flip := func() {
		next := snaps[0]
		if srv.Publisher.Current().For(nil) == next {
			next = snaps[1]
		}
		srv.Publisher.Publish(fleet.NewFleet(next, time.Now()))
	}

	b.Run("sotw", func(b *testing.B) {
		s := xdstest.OpenADS(b, conn, xdstest.Node("sotw"))
		s.Request(cds)
		s.RecvType(cds)
		s.Request(cds)
		s.Request(eds, names...)
		s.RecvType(eds)
		s.Request(eds, names...)
		i, bytes := 0, 0
		for b.Loop() {
			i++
			flip()
			resp := s.RecvType(eds)
			bytes += proto.Size(resp) + 5
			s.Request(eds, names...)
		}
		b.ReportMetric(float64(bytes)/float64(i), "wire-bytes/change")
		s.Close()
	})

	b.Run("delta", func(b *testing.B) {
		s := xdstest.OpenDeltaADS(b, conn, xdstest.Node("delta"))
		s.Subscribe(cds)
		s.ACK(s.RecvType(cds))
		s.Subscribe(eds, names...)
		s.ACK(s.RecvType(eds))
		i, bytes := 0, 0
		for b.Loop() {
			i++
			flip()
			resp := s.RecvType(eds)
			if len(resp.Resources) != 1 {
				b.Fatalf("delta sent %d assignments for one change", len(resp.Resources))
			}
			bytes += proto.Size(resp) + 5
			s.ACK(resp)
		}
		b.ReportMetric(float64(bytes)/float64(i), "wire-bytes/change")
		s.Close()
	})
}

// BenchmarkFanOutNamedEndpoints measures one endpoint change pushed to 100
// ADS streams that each subscribe to 900 of 1,000 assignments by name (as
// Envoy's EDS does, and gRPC's every type): the shared path, where a push
// is planned once per group and transition and each stream sends the one
// changed assignment. Per op: the publish, 100 sends, 100 receipts and
// ACKs.
func BenchmarkFanOutNamedEndpoints(b *testing.B) {
	srv := xdstest.Start(b, xds.Options{MaxRequestsPerSecond: -1})
	snaps := []*snapshot.Snapshot{
		xdstest.Snapshot(b, srv.Registry, oneEndpointChange(0)),
		xdstest.Snapshot(b, srv.Registry, oneEndpointChange(1)),
	}
	srv.Publisher.Publish(fleet.NewFleet(snaps[0], time.Now()))
	names := make([]string, 900)
	for i := range names {
		names[i] = fmt.Sprintf("service-%04d", i)
	}
	conn := xdstest.Dial(b, srv.Addr)
	streams := make([]*xdstest.Stream, 100)
	for i := range streams {
		s := xdstest.OpenADS(b, conn, xdstest.Node(fmt.Sprint("fan-", i)))
		s.Request(eds, names...)
		s.RecvType(eds)
		s.Request(eds, names...)
		streams[i] = s
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		srv.Publisher.Publish(fleet.NewFleet(snaps[i%2], time.Now()))
		for _, s := range streams {
			if r := s.RecvType(eds); len(r.Resources) != 1 {
				b.Fatalf("got %d assignments for one change", len(r.Resources))
			}
		}
		for _, s := range streams {
			s.Request(eds, names...)
		}
	}
}
