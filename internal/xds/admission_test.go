package xds_test

import (
	"context"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// At most MaxInitialSends streams send their first, full-state responses at
// once; the others wait their turn and are all served.
func TestAdmissionBoundsInitialSends(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{MaxInitialSends: 2})
	srv.Publish(t, bigClusters(0, 1<<20)...)
	// Clients with small flow-control windows that do not read yet: each
	// server-side first send blocks, holding its token.
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []grpc.ClientStream
	for i := range 6 {
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, xdstest.ADSMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&discoveryv3.DiscoveryRequest{Node: xdstest.Node("storm-" + string(rune('a'+i))), TypeUrl: cds}); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, cs)
	}
	// Everyone is served in the end.
	for _, cs := range streams {
		resp := &discoveryv3.DiscoveryResponse{}
		if err := cs.RecvMsg(resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Resources) < 1000 {
			t.Fatalf("%d clusters", len(resp.Resources))
		}
	}
	if peak := srv.XDS.InitialSendsPeak(); peak < 1 || peak > 2 {
		t.Fatalf("%d initial sends at once, bound 2", peak)
	}
}

// New streams past the rate wait, and past the wait are told to retry.
func TestAdmissionBoundsNewStreams(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{NewStreamsPerSecond: 2, AdmissionWait: 1})
	srv.Publish(t, base()...)
	conn := xdstest.Dial(t, srv.Addr)
	refused := 0
	for i := range 10 {
		s := xdstest.OpenADS(t, conn, xdstest.Node("n"+string(rune('a'+i))))
		s.Request(cds)
		if _, err := s.Next(); status.Code(err) == codes.ResourceExhausted {
			refused++
		}
	}
	if refused == 0 || refused == 10 {
		t.Fatalf("%d of 10 new streams refused at 2 a second; want some, not all", refused)
	}
}

// A stream flooding the server with requests is cut off.
func TestFloodedStreamIsCutOff(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{MaxRequestsPerSecond: 20})
	srv.Publish(t, base()...)
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("flood"))
	for range 100 {
		if s.TrySend(&discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/example.NotServed"}) != nil {
			break // cut off
		}
	}
	if got := status.Code(s.Err()); got != codes.ResourceExhausted {
		t.Fatalf("flooding stream ended with %v, want ResourceExhausted", got)
	}
}
