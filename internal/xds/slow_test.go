package xds_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// bigClusters returns a snapshot's worth of clusters of about size bytes in
// all, tagged with gen so each generation has new versions.
func bigClusters(gen, size int) []any {
	var out []any
	pad := strings.Repeat("x", 1000)
	for i := 0; i < size/1000; i++ {
		c := xdstest.Cluster(fmt.Sprintf("c%04d", i))
		c.AltStatName = fmt.Sprintf("%d-%s", gen, pad)
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		c.EdsClusterConfig = nil
		out = append(out, c)
	}
	return out
}

// rawADS opens an ADS stream on a connection of its own with small
// flow-control windows (64 KiB), which the test reads only when it
// chooses to; both end with the test.
func rawADS(t *testing.T, addr string) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, xdstest.ADSMethod)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A stream whose client stops reading holds at most one pending response,
// skips the versions published meanwhile, then gets the newest; it blocks
// neither the publisher nor other streams.
func TestSlowStreamSkipsToNewest(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	srv.Publish(t, bigClusters(0, 1<<20)...)

	// A raw stream with small flow-control windows that the test reads only
	// when it chooses to.
	slow := rawADS(t, srv.Addr)
	if err := slow.SendMsg(&discoveryv3.DiscoveryRequest{Node: xdstest.Node("slow"), TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}

	// A healthy stream on another connection, reading as it should.
	fast := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("fast"))
	fast.Request(cds)
	fast.RecvType(cds)

	// Twenty new versions while the slow client reads nothing. Publish
	// never blocks, and the healthy stream keeps up.
	const gens = 20
	for gen := 1; gen <= gens; gen++ {
		srv.Publish(t, bigClusters(gen, 1<<20)...)
	}
	last := srv.Publisher.Current().For(nil).Set(cds).Version()
	for {
		fast.Request(cds)
		if fast.RecvType(cds).VersionInfo == last {
			break
		}
	}

	// The slow client now reads: the response it was sent first, at most
	// one more it could not refuse, and then the newest. Never all twenty.
	var versions []string
	for len(versions) == 0 || versions[len(versions)-1] != last {
		resp := &discoveryv3.DiscoveryResponse{}
		if err := slow.RecvMsg(resp); err != nil {
			t.Fatalf("slow stream: %v", err)
		}
		versions = append(versions, resp.VersionInfo)
		if len(versions) > 3 {
			t.Fatalf("slow stream received %d responses (%v); it should skip to the newest", len(versions), versions)
		}
		if err := slow.SendMsg(&discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: resp.Nonce, VersionInfo: resp.VersionInfo}); err != nil {
			t.Fatal(err)
		}
	}
}

// Shutdown ends open streams with UNAVAILABLE so clients reconnect elsewhere.
// A stream opened after Shutdown (one Shutdown did not find among the
// open streams) is ended too, at once.
func TestShutdownEndsStreamsOpenedAfter(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	srv.Publish(t, base()...)
	srv.XDS.Shutdown()
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("n1"))
	// The server may end the stream before the request is sent (the send
	// then fails with EOF): what counts is how the stream ended.
	_ = s.TrySend(&discoveryv3.DiscoveryRequest{TypeUrl: cds})
	if got := status.Code(s.Err()); got != codes.Unavailable {
		t.Fatalf("stream opened after Shutdown ended with %v, want Unavailable", got)
	}
}

func TestShutdownEndsStreams(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	srv.Publish(t, base()...)
	s := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("n1"))
	s.Request(cds)
	s.RecvType(cds)
	srv.XDS.Shutdown()
	if got := status.Code(s.Err()); got != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", got)
	}
}

// Pushes run on a few goroutines (drainers), not one per stream: more
// clients that stop reading than there are drainers must not hold up the
// rest of the fleet. The stalled clients take their first config, then
// read nothing: a publish's push to each fills its flow-control window,
// and the next one blocks in a drainer's send. A drainer blocked there
// lets another take the queue, and a healthy stream gets every publish
// long before the stalled sends are evicted (30s).
func TestStalledClientsDoNotHoldUpPushes(t *testing.T) {
	srv := xdstest.Start(t, xds.Options{})
	srv.Publish(t, bigClusters(0, 10<<10)...)
	stalled := 2*runtime.GOMAXPROCS(0) + 2
	for i := range stalled {
		s := rawADS(t, srv.Addr)
		if err := s.SendMsg(&discoveryv3.DiscoveryRequest{Node: xdstest.Node(fmt.Sprintf("stalled-%d", i)), TypeUrl: cds}); err != nil {
			t.Fatal(err)
		}
		first := &discoveryv3.DiscoveryResponse{}
		if err := s.RecvMsg(first); err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&discoveryv3.DiscoveryRequest{TypeUrl: cds, ResponseNonce: first.Nonce, VersionInfo: first.VersionInfo}); err != nil {
			t.Fatal(err)
		}
	}
	fast := xdstest.OpenADS(t, xdstest.Dial(t, srv.Addr), xdstest.Node("fast"))
	fast.Request(cds)
	fast.ACK(fast.RecvType(cds))
	start := time.Now()
	for gen := 1; gen <= 4; gen++ {
		srv.Publish(t, bigClusters(gen, 1<<20)...)
		want := srv.Publisher.Current().For(nil).Set(cds).Version()
		for {
			resp := fast.RecvType(cds)
			fast.ACK(resp)
			if resp.VersionInfo == want {
				break
			}
		}
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("four publishes took %s to reach a healthy stream beside %d stalled ones", took, stalled)
	}
}
