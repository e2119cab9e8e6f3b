package xdstest

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// DeltaADSMethod is the full method name of the aggregated delta stream.
const DeltaADSMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"

// DeltaStream is one scripted incremental stream.
type DeltaStream struct {
	*base[discoveryv3.DeltaDiscoveryResponse]
}

// OpenDelta starts a delta stream on method.
func OpenDelta(t testing.TB, conn *grpc.ClientConn, method string, node *corev3.Node) *DeltaStream {
	t.Helper()
	return &DeltaStream{open[discoveryv3.DeltaDiscoveryResponse](t, conn, method, node)}
}

// OpenDeltaADS starts an aggregated delta stream.
func OpenDeltaADS(t testing.TB, conn *grpc.ClientConn, node *corev3.Node) *DeltaStream {
	return OpenDelta(t, conn, DeltaADSMethod, node)
}

// OpenDeltaType starts the per-type delta stream for typ.
func OpenDeltaType(t testing.TB, conn *grpc.ClientConn, typ *xdstype.Type, node *corev3.Node) *DeltaStream {
	return OpenDelta(t, conn, "/"+typ.Service+"/"+typ.DeltaMethod, node)
}

// Send sends req, adding the node to the stream's first request when the
// test left it out.
func (s *DeltaStream) Send(req *discoveryv3.DeltaDiscoveryRequest) {
	s.t.Helper()
	req.Node = s.nodeFor(req.Node)
	s.sendMsg(req)
}

// Subscribe sends a spontaneous request (no nonce) subscribing to names.
func (s *DeltaStream) Subscribe(typeURL string, names ...string) {
	s.t.Helper()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

// Unsubscribe sends a spontaneous request unsubscribing from names.
func (s *DeltaStream) Unsubscribe(typeURL string, names ...string) {
	s.t.Helper()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesUnsubscribe: names})
}

// ACK acknowledges resp.
func (s *DeltaStream) ACK(resp *discoveryv3.DeltaDiscoveryResponse) {
	s.t.Helper()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce})
}

// NACK rejects resp.
func (s *DeltaStream) NACK(resp *discoveryv3.DeltaDiscoveryResponse, message string) {
	s.t.Helper()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce, ErrorDetail: &status.Status{Code: 3, Message: message}})
}

// Recv returns the next response, failing the test after Timeout.
func (s *DeltaStream) Recv() *discoveryv3.DeltaDiscoveryResponse {
	s.t.Helper()
	resp, err := s.recv()
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	return resp
}

// NextWithin returns the next response, or an error if none comes within
// d: for a test that a response does not come within a bounded time.
func (s *DeltaStream) NextWithin(d time.Duration) (*discoveryv3.DeltaDiscoveryResponse, error) {
	return s.recvWithin(d)
}

// RecvType returns the next response and fails unless it is of typeURL.
func (s *DeltaStream) RecvType(typeURL string) *discoveryv3.DeltaDiscoveryResponse {
	s.t.Helper()
	resp := s.Recv()
	if resp.TypeUrl != typeURL {
		s.t.Fatalf("got a response of %s, want %s", resp.TypeUrl, typeURL)
	}
	return resp
}

// ExpectSilence proves that nothing was sent since the last Recv: it
// subscribes to the probe Runtime resource, which a delta server answers
// every time (X29), and requires the next response to be the probe's.
func (s *DeltaStream) ExpectSilence() {
	s.t.Helper()
	s.Subscribe(xdstype.RuntimeURL, ProbeName)
	resp := s.Recv()
	if resp.TypeUrl != xdstype.RuntimeURL {
		s.t.Fatalf("expected no response, got one of %s (%d resources, removed %v)", resp.TypeUrl, len(resp.Resources), resp.RemovedResources)
	}
	s.ACK(resp)
}
