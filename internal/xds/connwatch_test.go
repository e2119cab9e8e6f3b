package xds_test

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// syncBuffer is a log sink the server's goroutines write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rawClient is an HTTP/2 client on a bare TCP connection: it sends what a
// gRPC client would not (pings back to back, streams over the bound) and
// reads the server's frames as they are.
type rawClient struct {
	conn net.Conn
	fr   *http2.Framer
}

// dialRawTLS dials addr as a rawClient, over TLS with cfg (nil:
// plaintext), negotiating h2 as gRPC does.
func dialRawTLS(t *testing.T, addr string, cfg *tls.Config) *rawClient {
	t.Helper()
	var conn net.Conn
	var err error
	if cfg == nil {
		conn, err = net.Dial("tcp", addr)
	} else {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2"}
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: xdstest.Timeout}, "tcp", addr, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(xdstest.Timeout))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &rawClient{conn: conn, fr: http2.NewFramer(conn, conn)}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

// openADS sends the HEADERS of a gRPC ADS call on stream id.
func (c *rawClient) openADS(t *testing.T, id uint32) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", xdstest.ADSMethod}, {":authority", "pylon"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// until reads frames until ok accepts one, failing if the connection ends
// or the deadline passes first.
func (c *rawClient) until(t *testing.T, what string, ok func(http2.Frame) bool) http2.Frame {
	t.Helper()
	for range 1000 {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no %s from the server: %v", what, err)
		}
		if ok(f) {
			return f
		}
	}
	t.Fatalf("no %s in 1000 frames", what)
	return nil
}

// transport is a way to serve and reach the xDS server: every connection
// watch test runs over each, since under TLS the frames the watch reads
// are encrypted on the socket (Server.Credentials reads them above TLS).
type transport struct {
	name   string
	server func(t *testing.T) *tls.Config // nil config: plaintext
	client func(t *testing.T) *tls.Config
}

// transports returns plaintext and TLS, sharing one test CA.
func transports(t *testing.T) []transport {
	ca := identitytest.NewCA(t, "connwatch test CA")
	return []transport{
		{name: "plaintext", server: func(*testing.T) *tls.Config { return nil }, client: func(*testing.T) *tls.Config { return nil }},
		{name: "tls", server: func(t *testing.T) *tls.Config { return ca.ServerConfig(t) }, client: func(*testing.T) *tls.Config { return ca.ClientConfig(nil) }},
	}
}

// A client pinging faster than the keepalive policy allows gets GOAWAY
// ENHANCE_YOUR_CALM from gRPC and its connection closed, every stream on
// it with it: Pylon logs it and reports it (ConnectionClosed,
// too_many_pings). Before, nothing in Pylon's log or metrics said why a
// whole connection of proxies had gone.
func TestConnectionClosedForTooManyPings(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) { tooManyPings(t, tr) })
	}
}

func tooManyPings(t *testing.T, tr transport) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartGRPC(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, tr.server(t),
		// The daemon's policy.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	c := dialRawTLS(t, srv.Addr, tr.client(t))
	for i := range 4 {
		if err := c.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	f := c.until(t, "GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "too_many_pings" {
		t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", f.ErrCode, f.DebugData())
	}
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if e.Reason != guard.ConnTooManyPings || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("ConnectionClosed reason %q peer %q, want %q from %s", e.Reason, e.Peer, guard.ConnTooManyPings, c.conn.LocalAddr())
	}
	line := "reason=" + guard.ConnTooManyPings
	if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning with %s in the log:\n%s", line, logs.String())
	}
}

// A stream over the connection's bound is refused by gRPC itself
// (RST_STREAM REFUSED_STREAM), before Pylon's handler runs: Pylon reports
// it (TransportRefused) and logs it, once per connection.
func TestStreamRefusedByTransportIsReported(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) { refusedByTransport(t, tr) })
	}
}

func refusedByTransport(t *testing.T, tr transport) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartTLS(t, xds.Options{Observer: rec, MaxStreamsPerConnection: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, tr.server(t))
	c := dialRawTLS(t, srv.Addr, tr.client(t))
	c.openADS(t, 1)
	c.openADS(t, 3)
	c.openADS(t, 5)
	f := c.until(t, "RST_STREAM", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if f.StreamID == 1 || f.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("RST_STREAM on stream %d with %v, want stream 3 or 5 refused (REFUSED_STREAM)", f.StreamID, f.ErrCode)
	}
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.TransportRefused })
	if e.Reason != guard.TransportRefusedStreams || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("TransportRefused reason %q peer %q", e.Reason, e.Peer)
	}
	// Both refusals are counted; the line is written once.
	deadline := time.Now().Add(xdstest.Timeout)
	for rec.count(func(e status.Event) bool { return e.Kind == status.TransportRefused }) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second refused stream was not reported")
		}
		<-rec.wake
	}
	if n := strings.Count(logs.String(), "reason="+guard.TransportRefusedStreams); n != 1 {
		t.Fatalf("%d log lines for the refused streams, want 1:\n%s", n, logs.String())
	}
	// The connection itself stays: the stream within the bound is served.
	if n := rec.count(func(e status.Event) bool { return e.Kind == status.ConnectionClosed }); n != 0 {
		t.Fatalf("the connection was closed (%d events)", n)
	}
}

// A client closing its connection is counted as its own doing, and not
// logged as the server's.
func TestConnectionClosedByClient(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) { closedByClient(t, tr) })
	}
}

func closedByClient(t *testing.T, tr transport) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartTLS(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, tr.server(t))
	c := dialRawTLS(t, srv.Addr, tr.client(t))
	c.until(t, "SETTINGS", func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok })
	c.conn.Close()
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if e.Reason != guard.ConnClientClosed {
		t.Fatalf("ConnectionClosed reason %q, want %q", e.Reason, guard.ConnClientClosed)
	}
	if strings.Contains(logs.String(), "closed by the server") {
		t.Fatalf("a client's close logged as the server's:\n%s", logs.String())
	}
}

// A client that stops answering the server's keepalive pings has its
// connection closed by gRPC without GOAWAY: reported as "transport" and
// logged as the server's doing, not taken for the client's close.
func TestConnectionClosedForUnansweredKeepalive(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) { unansweredKeepalive(t, tr) })
	}
}

func unansweredKeepalive(t *testing.T, tr transport) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartGRPC(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, tr.server(t),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 100 * time.Millisecond, Timeout: 100 * time.Millisecond}))
	c := dialRawTLS(t, srv.Addr, tr.client(t))
	// Read nothing, answer nothing: the server's ping goes unacknowledged.
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if e.Reason != guard.ConnTransport || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("ConnectionClosed reason %q peer %q, want %q", e.Reason, e.Peer, guard.ConnTransport)
	}
	if !strings.Contains(logs.String(), "reason="+guard.ConnTransport) {
		t.Fatalf("no line with reason=%s in the log:\n%s", guard.ConnTransport, logs.String())
	}
}

// A TLS handshake that fails (here: a client that does not trust the
// server's certificate) ends the connection as tls_handshake, logged as
// the server's doing, not as the client's close.
func TestConnectionClosedForTLSHandshake(t *testing.T) {
	rec := newRecorder()
	var logs syncBuffer
	ca, other := identitytest.NewCA(t, "server CA"), identitytest.NewCA(t, "another CA")
	srv := xdstest.StartTLS(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, ca.ServerConfig(t))
	cfg := other.ClientConfig(nil)
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: xdstest.Timeout}, "tcp", srv.Addr, cfg)
	if err == nil {
		conn.Close()
		t.Fatal("the handshake succeeded with a client trusting another CA")
	}
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if e.Reason != guard.ConnHandshake {
		t.Fatalf("ConnectionClosed reason %q, want %q", e.Reason, guard.ConnHandshake)
	}
	if !strings.Contains(logs.String(), "reason="+guard.ConnHandshake) {
		t.Fatalf("no line with reason=%s in the log:\n%s", guard.ConnHandshake, logs.String())
	}
}

// TLS credentials not wrapped by Server.Credentials leave the watch only
// ciphertext: it reads no frames from it rather than guess, so gRPC's
// GOAWAY for too many pings is reported as transport (what the socket
// shows), never as a reason made up from encrypted bytes.
func TestConnectionWatchOffUnderUnwrappedTLS(t *testing.T) {
	rec := newRecorder()
	ca := identitytest.NewCA(t, "connwatch test CA")
	srv := xdstest.StartGRPC(t, xds.Options{Observer: rec}, nil,
		grpc.Creds(credentials.NewTLS(ca.ServerConfig(t))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	c := dialRawTLS(t, srv.Addr, ca.ClientConfig(nil))
	for i := range 4 {
		if err := c.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.until(t, "GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	e := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if e.Reason != guard.ConnTransport {
		t.Fatalf("ConnectionClosed reason %q under unwrapped TLS, want %q", e.Reason, guard.ConnTransport)
	}
}
