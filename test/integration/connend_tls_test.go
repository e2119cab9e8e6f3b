package integration

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
)

// Under xDS TLS the daemon reads the connection's HTTP/2 frames above TLS
// (xds.Server.Credentials), so the reason a connection ended is what gRPC
// did, not what the ciphertext looked like: a client that floods pings is
// cut off by gRPC's keepalive policy and counted as too_many_pings. With
// the credentials unwrapped, it would read as transport.
func TestMTLSConnectionEndReason(t *testing.T) {
	ports := startBackends(t, 1)
	m := startMTLS(t, greeterConfig("greeter-backends", ports), daemon.Options{})
	cfg := &tls.Config{RootCAs: certstest.Pool(m.ca), ServerName: "localhost", MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", m.xdsAddr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 1000 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY from the server: %v", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			break
		}
	}
	var metric string
	if !eventually(func() bool {
		for _, l := range strings.Split(m.get(t, "/metrics"), "\n") {
			if strings.HasPrefix(l, "pylon_xds_connections_closed_total") && strings.Contains(l, `reason="too_many_pings"`) && !strings.HasSuffix(l, " 0") {
				metric = l
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no connection counted as closed for too_many_pings:\n%s", grepLines(m.get(t, "/metrics"), "pylon_xds_connections_closed_total"))
	}
	t.Log(metric)
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
