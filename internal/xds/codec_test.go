package xds

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds/wire"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// countingCodec is the proto codec, counting the responses with resources
// it is asked to encode: each is a response encoded for one stream.
type countingCodec struct {
	encoding.CodecV2
	mu        sync.Mutex
	perStream map[string]int // by type URL
}

func (c *countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	m := v
	if e, ok := v.(*wire.Encoded); ok {
		m = e.Message
	}
	key, n := "", 0
	switch resp := m.(type) {
	case *discoverygrpc.DiscoveryResponse:
		key, n = resp.TypeUrl, len(resp.Resources)
	case *discoverygrpc.DeltaDiscoveryResponse:
		key, n = "delta "+resp.TypeUrl, len(resp.Resources)
	}
	if n > 0 {
		c.mu.Lock()
		c.perStream[key]++
		c.mu.Unlock()
	}
	return c.CodecV2.Marshal(v)
}

// countEncodings installs a countingCodec as the codec every gRPC server
// and client in this process looks up by name, until the test ends.
func countEncodings(t *testing.T) *countingCodec {
	orig := encoding.GetCodecV2("proto")
	cc := &countingCodec{CodecV2: orig, perStream: map[string]int{}}
	encoding.RegisterCodecV2(cc)
	t.Cleanup(func() { encoding.RegisterCodecV2(orig) })
	return cc
}

// serveLoopback serves srv on a loopback port until the test ends and
// returns a client connection to it.
func serveLoopback(t *testing.T, srv *Server) *grpc.ClientConn {
	g := grpc.NewServer(srv.GRPCOptions()...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(srv.Listener(lis)) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Shutdown(); g.Stop(); <-done })
	return conn
}

func (c *countingCodec) count() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.perStream {
		out[k] = v
	}
	return out
}

// Streams sent the same whole set get one encoding of it, shared: the
// proto codec never encodes a response with resources for a stream, so
// neither the send path (wire.Encoder) nor the server's codec (wire.ServerOptions)
// can fall back to encoding per stream unnoticed. Ten streams get every
// cluster and every assignment of a world of 200.
func TestWholeSetResponsesAreNotEncodedPerStream(t *testing.T) {
	cc := countEncodings(t)
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	snap := world(t, reg, 200, 1000, "c0")
	pub.Publish(fleet.NewFleet(snap, time.Now()))
	conn := serveLoopback(t, New(Options{Registry: reg, Fleets: pub}))
	all := snap.Set(xdstype.EndpointURL).Names()
	const streams = 10
	for i := range streams {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		node := &corev3.Node{Id: fmt.Sprint("n", i)}
		for _, req := range []*discoverygrpc.DiscoveryRequest{
			{Node: node, TypeUrl: xdstype.ClusterURL},
			{TypeUrl: xdstype.EndpointURL, ResourceNames: all},
		} {
			if err := s.Send(req); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.TypeUrl != req.TypeUrl || len(resp.Resources) != 200 || resp.Nonce == "" || resp.VersionInfo != snap.Set(req.TypeUrl).Version() {
				t.Fatalf("stream %d got %s with %d resources, nonce %q, version %q; want %s, 200, a nonce, %s",
					i, resp.TypeUrl, len(resp.Resources), resp.Nonce, resp.VersionInfo, req.TypeUrl, snap.Set(req.TypeUrl).Version())
			}
		}
		cancel()
	}
	if got := cc.count(); len(got) != 0 {
		t.Fatalf("responses encoded per stream by the codec: %v; want none (every stream shares one encoding per set)", got)
	}
}

// The delta counterpart: streams whose first response of a type carries the
// whole set (wildcard CDS, EDS subscribed to every cluster) get one shared
// encoding of it, never one made by the codec per stream.
func TestDeltaWholeSetResponsesAreNotEncodedPerStream(t *testing.T) {
	cc := countEncodings(t)
	reg := xdstype.New()
	pub := fleet.NewPublisher()
	snap := world(t, reg, 200, 1000, "c0")
	pub.Publish(fleet.NewFleet(snap, time.Now()))
	conn := serveLoopback(t, New(Options{Registry: reg, Fleets: pub}))
	all := snap.Set(xdstype.EndpointURL).Names()
	const streams = 10
	for i := range streams {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		node := &corev3.Node{Id: fmt.Sprint("n", i)}
		for _, req := range []*discoverygrpc.DeltaDiscoveryRequest{
			{Node: node, TypeUrl: xdstype.ClusterURL, ResourceNamesSubscribe: []string{"*"}},
			{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: all},
		} {
			if err := s.Send(req); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.TypeUrl != req.TypeUrl || len(resp.Resources) != 200 || len(resp.RemovedResources) != 0 || resp.Nonce == "" {
				t.Fatalf("stream %d got %s with %d resources, %d removed, nonce %q; want %s, 200, none removed, a nonce",
					i, resp.TypeUrl, len(resp.Resources), len(resp.RemovedResources), resp.Nonce, req.TypeUrl)
			}
		}
		cancel()
	}
	if got := cc.count(); len(got) != 0 {
		t.Fatalf("delta responses encoded per stream by the codec: %v; want none (every stream shares one encoding per set)", got)
	}
}

// The encoding shared by streams is one: every stream's response holding
// the whole set gets the same bytes for its body (the same memory, not a
// copy), and only its own nonce is encoded for it.
func TestWholeSetBodyIsOneEncoding(t *testing.T) {
	reg := xdstype.New()
	snap := world(t, reg, 50, 1000, "c0")
	srv := New(Options{Registry: reg, Fleets: fleet.NewPublisher()})
	set := snap.Set(xdstype.ClusterURL)
	var first *byte
	for i := range 3 {
		resp := firstSotW(srv, snap, xdstype.ClusterURL)
		if resp == nil || len(resp.Resources) != set.Len() {
			t.Fatalf("stream %d: no whole-set response", i)
		}
		enc, ok := srv.enc.SotW(set, false, resp).(*wire.Encoded)
		if !ok {
			t.Fatalf("stream %d: the whole set's response is not sent as the shared encoding", i)
		}
		body, tail := enc.Parts()
		if i == 0 {
			first = unsafe.SliceData(body)
		} else if unsafe.SliceData(body) != first {
			t.Fatalf("stream %d: its body is a new encoding, not the one shared", i)
		}
		// Body then tail is the stream's own response, nonce included.
		var got discoverygrpc.DiscoveryResponse
		if err := proto.Unmarshal(append(append([]byte(nil), body...), tail...), &got); err != nil {
			t.Fatal(err)
		}
		resp.ControlPlane = nil // not set on the bare stream's response
		if !proto.Equal(&got, resp) {
			t.Fatalf("stream %d: body and tail decode to a different response", i)
		}
	}
}

// The delta counterpart: every delta stream's first response holding the
// whole set gets the same bytes for its body, and only its own nonce is
// encoded for it.
func TestDeltaWholeSetBodyIsOneEncoding(t *testing.T) {
	reg := xdstype.New()
	snap := world(t, reg, 50, 1000, "c0")
	srv := New(Options{Registry: reg, Fleets: fleet.NewPublisher()})
	typ := reg.Lookup(xdstype.ClusterURL)
	set := snap.Set(xdstype.ClusterURL)
	var first *byte
	for i := range 3 {
		d := firstDelta(srv, snap, typ.URL, "*")
		// As deltaStream.respond builds it, each stream with its own nonce.
		resp := &discoverygrpc.DeltaDiscoveryResponse{SystemVersionInfo: snap.Version(), Resources: d.Resources, RemovedResources: d.Removed, TypeUrl: typ.URL, Nonce: fmt.Sprint("nonce-", i)}
		if len(resp.Resources) != set.Len() {
			t.Fatalf("stream %d: %d clusters in the first response, want the whole set's %d", i, len(resp.Resources), set.Len())
		}
		enc, ok := srv.enc.Delta(set, false, resp).(*wire.Encoded)
		if !ok {
			t.Fatalf("stream %d: the whole set's delta response is not sent as the shared encoding", i)
		}
		body, tail := enc.Parts()
		if i == 0 {
			first = unsafe.SliceData(body)
		} else if unsafe.SliceData(body) != first {
			t.Fatalf("stream %d: its body is a new encoding, not the one shared", i)
		}
		var got discoverygrpc.DeltaDiscoveryResponse
		if err := proto.Unmarshal(append(append([]byte(nil), body...), tail...), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(resp, &got, protocmp.Transform()); diff != "" {
			t.Fatalf("stream %d: body and tail decode to a different response (-want +got):\n%s", i, diff)
		}
	}
}
