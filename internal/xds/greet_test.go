package xds_test

import (
	"context"
	"io"
	"net"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// memStream is a grpc.ServerStream in memory, as a transport without gRPC
// (REST polling) hands Server.ServeStream one.
type memStream struct {
	ctx  context.Context
	reqs chan *discoveryv3.DiscoveryRequest
	sent chan proto.Message
}

func (m *memStream) SetHeader(metadata.MD) error  { return nil }
func (m *memStream) SendHeader(metadata.MD) error { return nil }
func (m *memStream) SetTrailer(metadata.MD)       {}
func (m *memStream) Context() context.Context     { return m.ctx }

func (m *memStream) SendMsg(v any) error {
	select {
	case m.sent <- v.(proto.Message):
		return nil
	case <-m.ctx.Done():
		return m.ctx.Err()
	}
}

func (m *memStream) RecvMsg(v any) error {
	select {
	case r, ok := <-m.reqs:
		if !ok {
			return io.EOF
		}
		proto.Merge(v.(proto.Message), r)
		return nil
	case <-m.ctx.Done():
		return m.ctx.Err()
	}
}

// TestX24GreetingNotOnServeStream: a transport without a reconnect backoff
// (Server.ServeStream, REST polling) is owed no first message, so a
// Cluster poll at the version the client holds is spared, not resent.
func TestX24GreetingNotOnServeStream(t *testing.T) {
	e := setup(t, base()...)
	s := e.ads(t, "poller")
	vc := fetch(t, s, cds).VersionInfo

	ctx, cancel := context.WithCancel(peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}))
	ms := &memStream{ctx: ctx, reqs: make(chan *discoveryv3.DiscoveryRequest, 1), sent: make(chan proto.Message, 4)}
	done := make(chan error, 1)
	go func() { done <- e.srv.XDS.ServeStream(ms, cds, false) }()
	defer func() {
		cancel()
		<-done
	}()
	ms.reqs <- &discoveryv3.DiscoveryRequest{Node: xdstest.Node("poller"), TypeUrl: cds, VersionInfo: vc}
	e.rec.wait(t, func(ev status.Event) bool {
		return ev.Kind == status.ResponseSpared && ev.NodeID() == "poller" && !ev.ADS && ev.Version == vc
	})
	// A resend would have gone out before the spare was reported.
	select {
	case m := <-ms.sent:
		t.Fatalf("ServeStream sent %v at the version the client holds, want nothing", m)
	default:
	}
}
