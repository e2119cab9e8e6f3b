package xds_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// jsonLogs is a server started with a JSON log, and the lines it wrote.
type jsonLogs struct {
	buf *lockedBuffer
	rec *recorder
	srv *xdstest.Server
}

func startLogged(t *testing.T, opts xds.Options) *jsonLogs {
	l := &jsonLogs{buf: &lockedBuffer{}, rec: newRecorder()}
	opts.Observer = l.rec
	opts.Logger = slog.New(slog.NewJSONHandler(l.buf, nil))
	l.srv = xdstest.Start(t, opts)
	return l
}

// lines returns the log lines whose msg is msg, decoded.
func (l *jsonLogs) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.buf.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A proxy connecting is logged at INFO with who it is and how it connects,
// its client strings (up to the 1 KiB checkNode accepts) cut shorter; its
// leaving with why and after how long.
func TestConnectionLogged(t *testing.T) {
	l := startLogged(t, xds.Options{})
	l.srv.Publish(t, base()...)
	conn := xdstest.Dial(t, l.srv.Addr)
	node := &corev3.Node{Id: "edge-1", Cluster: "edge", UserAgentName: "envoy" + strings.Repeat("x", 1000), UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.36.2"}}
	s := xdstest.OpenADS(t, conn, node)
	s.Request(cds)
	s.RecvType(cds)
	opened := l.lines(t, "proxy connected")
	if len(opened) != 1 {
		t.Fatalf("%d connect lines, want 1: %s", len(opened), l.buf.String())
	}
	o := opened[0]
	client, _ := o["client"].(string)
	if o["level"] != "INFO" || o["node"] != "edge-1" || o["cluster"] != "edge" || o["group"] != "default" || o["kind"] != "ADS" ||
		!strings.HasPrefix(o["peer"].(string), "127.0.0.1:") || o["identity"] != "none" || !strings.HasPrefix(client, "envoyxxx") || len(client) > 400 {
		t.Fatalf("connect line: %v", o)
	}

	s.Close()
	l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamClosed })
	closed := l.lines(t, "proxy disconnected")
	if len(closed) != 1 || closed[0]["level"] != "INFO" || closed[0]["reason"] != "client_closed" || closed[0]["node"] != "edge-1" || closed[0]["connected_for"] == nil {
		t.Fatalf("disconnect lines: %v", closed)
	}

	d := xdstest.OpenDeltaType(t, conn, l.srv.Registry.Lookup(eds), xdstest.Node("grpc-1"))
	d.Subscribe(eds, "a")
	d.RecvType(eds)
	if o := l.lines(t, "proxy connected"); len(o) != 2 || o[1]["kind"] != "EDS delta" || o[1]["client"] != "xdstest" {
		t.Fatalf("connect lines: %v", o)
	}
	l.srv.XDS.Shutdown()
	if err := d.Err(); err == nil {
		t.Fatal("the stream outlived the shutdown")
	}
	l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamClosed && e.NodeID() == "grpc-1" })
	if c := l.lines(t, "proxy disconnected"); len(c) != 2 || c[1]["reason"] != "server_shutdown" {
		t.Fatalf("disconnect lines: %v", c)
	}
}

// A stream the server refuses is logged as refused, with the error.
func TestDisconnectRefusedLogged(t *testing.T) {
	l := startLogged(t, xds.Options{MaxRequestsPerSecond: 2})
	l.srv.Publish(t, base()...)
	s := xdstest.OpenADS(t, xdstest.Dial(t, l.srv.Addr), xdstest.Node("n1"))
	for range 3 {
		// Ignored requests: no response comes before the refusal.
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/pylon.test.Nothing"})
	}
	if err := s.Err(); err == nil {
		t.Fatal("a flooding stream was not refused")
	}
	l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamClosed })
	c := l.lines(t, "proxy disconnected")
	if len(c) != 1 || c[0]["reason"] != "refused" || !strings.Contains(c[0]["error"].(string), "requests a second") {
		t.Fatalf("disconnect lines: %v", c)
	}
}

// The NACK line's running_version is the version the proxy last ACKed of
// the type on the stream, as the server recorded it: in delta too (where
// the request carries no version), and in state of the world whatever
// version_info the request claims.
func TestNACKRunningVersion(t *testing.T) {
	t.Run("delta", func(t *testing.T) {
		l := startLogged(t, xds.Options{})
		world := base()
		l.srv.Publish(t, world...)
		d := xdstest.OpenDeltaADS(t, xdstest.Dial(t, l.srv.Addr), xdstest.Node("n1"))
		d.Subscribe(eds, "a")
		r := d.RecvType(eds)
		d.ACK(r)
		acked := l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.RequestACK && e.Nonce == r.Nonce })
		world[2] = xdstest.Endpoints("a", 1001, 1004)
		l.srv.Publish(t, world...)
		r2 := d.RecvType(eds)
		d.NACK(r2, "bad endpoints")
		nacked := l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.RequestNACK })
		wantNACKLine(t, l, acked.Version, nacked.Version)
	})
	t.Run("sotw", func(t *testing.T) {
		l := startLogged(t, xds.Options{})
		world := base()
		l.srv.Publish(t, world...)
		s := xdstest.OpenADS(t, xdstest.Dial(t, l.srv.Addr), xdstest.Node("n1"))
		s.Request(eds, "a")
		r := s.RecvType(eds)
		s.ACK(r, "a")
		l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.RequestACK && e.Nonce == r.Nonce })
		world[2] = xdstest.Endpoints("a", 1001, 1004)
		l.srv.Publish(t, world...)
		r2 := s.RecvType(eds)
		s.NACK(r2, "a-version-it-never-had", "bad endpoints", "a")
		l.rec.wait(t, func(e status.Event) bool { return e.Kind == status.RequestNACK })
		wantNACKLine(t, l, r.VersionInfo, r2.VersionInfo)
	})
}

func wantNACKLine(t *testing.T, l *jsonLogs, running, rejected string) {
	t.Helper()
	lines := l.lines(t, "proxy rejected config")
	if running == "" || rejected == "" || running == rejected {
		t.Fatalf("versions %q and %q: the test needs two", running, rejected)
	}
	if len(lines) != 1 || lines[0]["running_version"] != running || lines[0]["rejected_version"] != rejected {
		t.Fatalf("NACK lines %v; want running_version %s, rejected_version %s", lines, running, rejected)
	}
}

// Over mTLS the connect line names the identity the client certificate
// proves, and the group that identity and node joined.
func TestConnectionLoggedIdentity(t *testing.T) {
	buf := &lockedBuffer{}
	m := startMTLS(t, xds.Options{Logger: slog.New(slog.NewJSONHandler(buf, nil))})
	s := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-1"), edgeNode("edge-1"))
	s.Request(cds)
	s.RecvType(cds)
	l := &jsonLogs{buf: buf}
	o := l.lines(t, "proxy connected")
	if len(o) != 1 || o[0]["identity"] != edgeSA+"edge-1" || o[0]["group"] != "secure" || o[0]["node"] != "edge-1" {
		t.Fatalf("connect lines: %v", o)
	}
}
