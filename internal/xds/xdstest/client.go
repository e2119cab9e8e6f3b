// Package xdstest is a scripted xDS client over real loopback gRPC, for
// protocol tests: it sends exactly the requests a test writes, records
// nonces and versions per type, and reads responses with a bound on time.
package xdstest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Timeout bounds every wait for a response.
const Timeout = 10 * time.Second

// ADSMethod is the full method name of the aggregated SotW stream.
const ADSMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"

// Server is a Pylon xDS server on a loopback port.
type Server struct {
	Addr      string
	Publisher *fleet.Publisher
	XDS       *xds.Server
	Registry  *xdstype.Registry
}

// Start runs an xDS server on 127.0.0.1:0 until the test ends. opts may be
// zero; Registry and Fleets are filled in.
func Start(t testing.TB, opts xds.Options) *Server {
	t.Helper()
	return StartTLS(t, opts, nil)
}

// StartTLS is Start with TLS (nil: plaintext), served as the daemon serves
// it: the server's gRPC options and tracked listener.
func StartTLS(t testing.TB, opts xds.Options, tlsConfig *tls.Config) *Server {
	t.Helper()
	return StartGRPC(t, opts, tlsConfig)
}

// StartGRPC is StartTLS with more gRPC server options after the server's
// own (keepalive, as the daemon adds it).
func StartGRPC(t testing.TB, opts xds.Options, tlsConfig *tls.Config, extra ...grpc.ServerOption) *Server {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = xdstype.New()
	}
	pub := fleet.NewPublisher()
	if opts.Fleets == nil {
		opts.Fleets = pub
	}
	if opts.Identifier == "" {
		opts.Identifier = "pylon-test"
	}
	srv := xds.New(opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gopts := append(srv.GRPCOptions(), extra...)
	if tlsConfig != nil {
		gopts = append(gopts, grpc.Creds(srv.Credentials(credentials.NewTLS(tlsConfig))))
	}
	g := grpc.NewServer(gopts...)
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(srv.Listener(lis))
	}()
	t.Cleanup(func() {
		srv.Shutdown()
		g.Stop()
		<-done
	})
	return &Server{Addr: lis.Addr().String(), Publisher: pub, XDS: srv, Registry: opts.Registry}
}

// Publish builds a snapshot from msgs and publishes it to every node.
func (s *Server) Publish(t testing.TB, msgs ...any) *snapshot.Snapshot {
	t.Helper()
	snap := Snapshot(t, s.Registry, msgs...)
	s.Publisher.Publish(fleet.NewFleet(snap, time.Now()))
	return snap
}

// Dial connects to addr over plaintext loopback gRPC until the test ends.
func Dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// DialTLS connects to addr over TLS with cfg until the test ends.
func DialTLS(t testing.TB, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// base is the part of a scripted stream that does not depend on the
// variant: opening, a reader goroutine, bounded receives, closing.
type base[Resp any] struct {
	t      testing.TB
	cs     grpc.ClientStream
	cancel context.CancelFunc
	node   *corev3.Node
	sent   bool
	resps  chan *Resp
	errc   chan error
	done   chan struct{}
	probes int
}

func open[Resp any](t testing.TB, conn *grpc.ClientConn, method string, node *corev3.Node) *base[Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	b := &base[Resp]{
		t: t, cs: cs, cancel: cancel, node: node,
		resps: make(chan *Resp, 64), errc: make(chan error, 1), done: make(chan struct{}),
	}
	go func() {
		defer close(b.done)
		for {
			resp := new(Resp)
			if err := cs.RecvMsg(resp); err != nil {
				b.errc <- err
				return
			}
			select {
			case b.resps <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(b.Close)
	return b
}

// Close ends the stream and waits for its reader.
func (b *base[Resp]) Close() {
	b.cancel()
	<-b.done
}

// nodeFor returns the node a request should carry: the stream's on its
// first request when the test left it out, node otherwise.
func (b *base[Resp]) nodeFor(node *corev3.Node) *corev3.Node {
	first := !b.sent
	b.sent = true
	if first && node == nil {
		return b.node
	}
	return node
}

func (b *base[Resp]) sendMsg(m any) {
	b.t.Helper()
	if err := b.cs.SendMsg(m); err != nil {
		b.t.Fatalf("send: %v", err)
	}
}

func (b *base[Resp]) recv() (*Resp, error) { return b.recvWithin(Timeout) }

// recvWithin is recv waiting at most d.
func (b *base[Resp]) recvWithin(d time.Duration) (*Resp, error) {
	select {
	case resp := <-b.resps:
		return resp, nil
	case err := <-b.errc:
		b.errc <- err
		return nil, err
	case <-time.After(d):
		return nil, fmt.Errorf("no response within %v", d)
	}
}

// Err waits for the stream to end and returns its error (nil for io.EOF).
func (b *base[Resp]) Err() error {
	b.t.Helper()
	select {
	case <-b.resps:
		b.t.Fatal("got a response, want the stream to end")
	case err := <-b.errc:
		b.errc <- err
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-time.After(Timeout):
		b.t.Fatalf("stream still open after %v", Timeout)
	}
	return nil
}

// Stream is one scripted SotW stream.
type Stream struct {
	*base[discoveryv3.DiscoveryResponse]
	// Nonce and Version hold the latest response's nonce and version per type.
	Nonce   map[string]string
	Version map[string]string
}

// Node returns a test node with the given id.
func Node(id string) *corev3.Node {
	return &corev3.Node{Id: id, Cluster: "test-cluster", UserAgentName: "xdstest"}
}

// Open starts a SotW stream on method ("/service/Method"), e.g. ADSMethod or
// a per-type method from the registry.
func Open(t testing.TB, conn *grpc.ClientConn, method string, node *corev3.Node) *Stream {
	t.Helper()
	return &Stream{
		base:  open[discoveryv3.DiscoveryResponse](t, conn, method, node),
		Nonce: map[string]string{}, Version: map[string]string{},
	}
}

// OpenADS starts an aggregated SotW stream.
func OpenADS(t testing.TB, conn *grpc.ClientConn, node *corev3.Node) *Stream {
	return Open(t, conn, ADSMethod, node)
}

// OpenType starts the per-type SotW stream for typ.
func OpenType(t testing.TB, conn *grpc.ClientConn, typ *xdstype.Type, node *corev3.Node) *Stream {
	return Open(t, conn, "/"+typ.Service+"/"+typ.SotWMethod, node)
}

// Send sends req as is, except that the node is added to the stream's first
// request when the test left it out.
func (s *Stream) Send(req *discoveryv3.DiscoveryRequest) {
	s.t.Helper()
	req.Node = s.nodeFor(req.Node)
	s.sendMsg(req)
}

// TrySend sends req and returns the error instead of failing the test,
// for streams the server is expected to end.
func (s *Stream) TrySend(req *discoveryv3.DiscoveryRequest) error {
	req.Node = s.nodeFor(req.Node)
	return s.cs.SendMsg(req)
}

// Request subscribes to names of typeURL, as an ACK of the latest response
// of that type (its nonce and version), as a well-behaved client would.
func (s *Stream) Request(typeURL string, names ...string) {
	s.t.Helper()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, ResponseNonce: s.Nonce[typeURL], VersionInfo: s.Version[typeURL]})
}

// ACK acknowledges resp, keeping the subscription names.
func (s *Stream) ACK(resp *discoveryv3.DiscoveryResponse, names ...string) {
	s.t.Helper()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resp.TypeUrl, ResourceNames: names, ResponseNonce: resp.Nonce, VersionInfo: resp.VersionInfo})
}

// NACK rejects resp: the version stays the one the client had before.
func (s *Stream) NACK(resp *discoveryv3.DiscoveryResponse, running, message string, names ...string) {
	s.t.Helper()
	s.Send(&discoveryv3.DiscoveryRequest{
		TypeUrl: resp.TypeUrl, ResourceNames: names, ResponseNonce: resp.Nonce, VersionInfo: running,
		ErrorDetail: &status.Status{Code: 3, Message: message},
	})
}

// Recv returns the next response, failing the test after Timeout.
func (s *Stream) Recv() *discoveryv3.DiscoveryResponse {
	s.t.Helper()
	resp, err := s.recv()
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	s.Nonce[resp.TypeUrl] = resp.Nonce
	s.Version[resp.TypeUrl] = resp.VersionInfo
	return resp
}

// Next returns the next response or the error that ended the stream.
func (s *Stream) Next() (*discoveryv3.DiscoveryResponse, error) { return s.recv() }

// NextWithin is Next waiting at most d: for a test that a response does
// not come within a bounded time.
func (s *Stream) NextWithin(d time.Duration) (*discoveryv3.DiscoveryResponse, error) {
	return s.recvWithin(d)
}

// RecvType returns the next response and fails unless it is of typeURL.
func (s *Stream) RecvType(typeURL string) *discoveryv3.DiscoveryResponse {
	s.t.Helper()
	resp := s.Recv()
	if resp.TypeUrl != typeURL {
		s.t.Fatalf("got a response of %s, want %s", resp.TypeUrl, typeURL)
	}
	return resp
}

// ProbeName is the Runtime resource that ExpectSilence subscribes to; a
// snapshot built by Snapshot always contains it.
const ProbeName = "xdstest-probe"

// ExpectSilence proves that the server sent nothing since the last Recv,
// without sleeping: it asks for the probe Runtime resource on the same ADS
// stream and requires the next response to be the probe's. A server answers
// requests in order, so anything sent before would arrive first.
func (s *Stream) ExpectSilence() {
	s.t.Helper()
	if s.probes > 0 {
		// Drop the probe, then subscribe again: re-adding an existing name
		// is always answered, and dropping it alone never is.
		s.Request(xdstype.RuntimeURL)
	}
	s.probes++
	s.Request(xdstype.RuntimeURL, ProbeName)
	resp := s.Recv()
	if resp.TypeUrl != xdstype.RuntimeURL {
		s.t.Fatalf("expected no response, got one of %s (version %s, %d resources)", resp.TypeUrl, resp.VersionInfo, len(resp.Resources))
	}
}

// StreamErr opens an ADS stream on conn as node and asks for Clusters,
// returning how the stream failed: nil if it answered within Timeout. For
// a client the server must refuse (a failed handshake fails the stream's
// open, a refusal its first receive).
func StreamErr(conn *grpc.ClientConn, node *corev3.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, ADSMethod)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdstype.ClusterURL}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return cs.RecvMsg(new(discoveryv3.DiscoveryResponse))
}
