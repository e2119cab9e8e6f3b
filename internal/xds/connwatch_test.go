package xds_test

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/pylon-xds/pylon/internal/xds"
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

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
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

// A client pinging faster than the keepalive policy allows gets GOAWAY
// ENHANCE_YOUR_CALM from gRPC and its connection closed, every stream on
// it with it: Pylon logs it and reports it (ConnectionClosed,
// too_many_pings). Before, nothing in Pylon's log or metrics said why a
// whole connection of proxies had gone.
func TestConnectionClosedForTooManyPings(t *testing.T) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartGRPC(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil,
		// The daemon's policy.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	c := dialRaw(t, srv.Addr)
	for i := range 4 {
		if err := c.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	f := c.until(t, "GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "too_many_pings" {
		t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", f.ErrCode, f.DebugData())
	}
	e := rec.wait(t, func(e xds.Event) bool { return e.Kind == xds.ConnectionClosed })
	if e.Reason != xds.ConnTooManyPings || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("ConnectionClosed reason %q peer %q, want %q from %s", e.Reason, e.Peer, xds.ConnTooManyPings, c.conn.LocalAddr())
	}
	line := "reason=" + xds.ConnTooManyPings
	if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning with %s in the log:\n%s", line, logs.String())
	}
}

// A stream over the connection's bound is refused by gRPC itself
// (RST_STREAM REFUSED_STREAM), before Pylon's handler runs: Pylon reports
// it (TransportRefused) and logs it, once per connection.
func TestStreamRefusedByTransportIsReported(t *testing.T) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.Start(t, xds.Options{Observer: rec, MaxStreamsPerConnection: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dialRaw(t, srv.Addr)
	c.openADS(t, 1)
	c.openADS(t, 3)
	c.openADS(t, 5)
	f := c.until(t, "RST_STREAM", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if f.StreamID == 1 || f.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("RST_STREAM on stream %d with %v, want stream 3 or 5 refused (REFUSED_STREAM)", f.StreamID, f.ErrCode)
	}
	e := rec.wait(t, func(e xds.Event) bool { return e.Kind == xds.TransportRefused })
	if e.Reason != xds.TransportRefusedStreams || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("TransportRefused reason %q peer %q", e.Reason, e.Peer)
	}
	// Both refusals are counted; the line is written once.
	deadline := time.Now().Add(xdstest.Timeout)
	for rec.count(func(e xds.Event) bool { return e.Kind == xds.TransportRefused }) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second refused stream was not reported")
		}
		<-rec.wake
	}
	if n := strings.Count(logs.String(), "reason="+xds.TransportRefusedStreams); n != 1 {
		t.Fatalf("%d log lines for the refused streams, want 1:\n%s", n, logs.String())
	}
	// The connection itself stays: the stream within the bound is served.
	if n := rec.count(func(e xds.Event) bool { return e.Kind == xds.ConnectionClosed }); n != 0 {
		t.Fatalf("the connection was closed (%d events)", n)
	}
}

// A client closing its connection is counted as its own doing, and not
// logged as the server's.
func TestConnectionClosedByClient(t *testing.T) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.Start(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dialRaw(t, srv.Addr)
	c.until(t, "SETTINGS", func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok })
	c.conn.Close()
	e := rec.wait(t, func(e xds.Event) bool { return e.Kind == xds.ConnectionClosed })
	if e.Reason != xds.ConnClientClosed {
		t.Fatalf("ConnectionClosed reason %q, want %q", e.Reason, xds.ConnClientClosed)
	}
	if strings.Contains(logs.String(), "closed by the server") {
		t.Fatalf("a client's close logged as the server's:\n%s", logs.String())
	}
}

// A client that stops answering the server's keepalive pings has its
// connection closed by gRPC without GOAWAY: reported as "transport" and
// logged as the server's doing, not taken for the client's close.
func TestConnectionClosedForUnansweredKeepalive(t *testing.T) {
	rec := newRecorder()
	var logs syncBuffer
	srv := xdstest.StartGRPC(t, xds.Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil,
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 100 * time.Millisecond, Timeout: 100 * time.Millisecond}))
	c := dialRaw(t, srv.Addr)
	// Read nothing, answer nothing: the server's ping goes unacknowledged.
	e := rec.wait(t, func(e xds.Event) bool { return e.Kind == xds.ConnectionClosed })
	if e.Reason != xds.ConnTransport || e.Peer != c.conn.LocalAddr().String() {
		t.Fatalf("ConnectionClosed reason %q peer %q, want %q", e.Reason, e.Peer, xds.ConnTransport)
	}
	if !strings.Contains(logs.String(), "reason="+xds.ConnTransport) {
		t.Fatalf("no line with reason=%s in the log:\n%s", xds.ConnTransport, logs.String())
	}
}
