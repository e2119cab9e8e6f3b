package integration

import (
	"crypto/tls"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Finding 5 (issue 30): when a CA is removed from --xds-client-ca, the
// connections whose client certificate it issued are closed within a
// bounded wait (a rotation is noticed without waiting for a handshake),
// cannot connect again, and receive none of the Secrets rotated after;
// a connection whose CA stays keeps its stream and receives them. The
// close is counted as client_cert_revoked and logged once. (Client
// certificates are required here: otherwise the client reconnects without
// one, the server no longer asking for its CA, and is served as any
// unverified client, with no Secret.)
func TestClientCARotationClosesConnections(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := certstest.NewCA(t, "old clients"), certstest.NewCA(t, "new clients")
	server := newCA.Issue(t, certstest.Server("pylon-1")).Write(t, newCA, dir, "server")
	bundle := filepath.Join(dir, "clients-ca.crt")
	certstest.WriteFile(t, bundle, append(append([]byte{}, oldCA.PEM...), newCA.PEM...))
	writeCerts(t, dir, "FIRST")
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, rotationConfig)
	logs := &daemontest.LogBuffer{}
	p, _ := runPylon(t, daemon.Options{
		ConfigPath: cfg, XDSTLS: daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: bundle},
		XDSRequireClientCert: true, NodeIdentity: nodeIdentity, TLSCheckEvery: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	dial := func(ca *certstest.CA, id string) *grpc.ClientConn {
		pair := ca.Issue(t, certstest.Client("spiffe://example.org/ns/edge/sa/"+id)).TLS(t)
		return dialWith(t, p.xdsAddr, newCA, pair)
	}
	revokedConn, keptConn := dial(oldCA, "edge-1"), dial(newCA, "edge-2")
	revoked := xdstest.OpenADS(t, revokedConn, &corev3.Node{Id: "edge-1", Cluster: "edge"})
	kept := xdstest.OpenADS(t, keptConn, &corev3.Node{Id: "edge-2", Cluster: "edge"})
	for _, s := range []*xdstest.Stream{revoked, kept} {
		s.Request(xdstype.SecretURL, "edge-cert")
		if r := s.RecvType(xdstype.SecretURL); len(r.Resources) != 1 {
			t.Fatalf("before the rotation: %d Secrets, want 1", len(r.Resources))
		}
		s.Request(xdstype.SecretURL, "edge-cert")
	}

	certstest.WriteFile(t, bundle, newCA.PEM)
	// Err waits up to xdstest.Timeout and fails on any response first.
	if err := revoked.Err(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("the stream of the removed CA's certificate ended with %v, want UNAVAILABLE", err)
	}

	// The Secret rotates: only the stream whose CA stayed receives it.
	writeCerts(t, dir, "SECOND")
	if r := kept.RecvType(xdstype.SecretURL); len(r.Resources) != 1 {
		t.Fatalf("after the rotation: %d Secrets, want 1", len(r.Resources))
	}
	if err := xdstest.StreamErr(revokedConn, &corev3.Node{Id: "edge-1", Cluster: "edge"}); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("reconnecting with the removed CA's certificate: %v, want UNAVAILABLE (a failed handshake)", err)
	}

	if !eventually(func() bool {
		return strings.Contains(p.get(t, "/metrics"), `pylon_xds_connections_closed_total{reason="client_cert_revoked"} 1`)
	}) {
		t.Errorf("the close is not counted:\n%s", grepLines(p.get(t, "/metrics"), "pylon_xds_connections_closed_total"))
	}
	if n := strings.Count(logs.String(), "reason=client_cert_revoked"); n != 1 {
		t.Errorf("the close is logged %d times, want once:\n%s", n, logs.String())
	}
}

// dialWith connects to addr over TLS trusting ca for the server and
// presenting pair.
func dialWith(t *testing.T, addr string, ca *certstest.CA, pair tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: certstest.Pool(ca), ServerName: "localhost", MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Finding 5 (issue 30): a connection is closed when its client
// certificate expires, through the daemon's TLS, and receives no Secret
// rotated after; the expired certificate cannot connect again.
func TestConnectionClosedAtCertExpiry(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "clients")
	server := ca.Issue(t, certstest.Server("pylon-1")).Write(t, ca, dir, "server")
	writeCerts(t, dir, "FIRST")
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, rotationConfig)
	p, _ := runPylon(t, daemon.Options{
		ConfigPath: cfg, XDSTLS: daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA},
		XDSRequireClientCert: true, NodeIdentity: nodeIdentity,
	})
	leaf := certstest.Client("spiffe://example.org/ns/edge/sa/edge-1")
	// X.509 keeps whole seconds: this certificate ends 1 to 2s from now.
	leaf.NotAfter = time.Now().Add(2 * time.Second)
	conn := dialWith(t, p.xdsAddr, ca, ca.Issue(t, leaf).TLS(t))
	node := &corev3.Node{Id: "edge-1", Cluster: "edge"}
	s := xdstest.OpenADS(t, conn, node)
	s.Request(xdstype.SecretURL, "edge-cert")
	if r := s.RecvType(xdstype.SecretURL); len(r.Resources) != 1 {
		t.Fatalf("before the expiry: %d Secrets, want 1", len(r.Resources))
	}
	s.Request(xdstype.SecretURL, "edge-cert")

	// Err waits up to xdstest.Timeout and fails on any response first.
	if err := s.Err(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("the expired certificate's stream ended with %v, want UNAVAILABLE", err)
	}
	writeCerts(t, dir, "SECOND")
	if err := xdstest.StreamErr(conn, node); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("reconnecting with the expired certificate: %v, want UNAVAILABLE (a failed handshake)", err)
	}
	if !eventually(func() bool {
		return strings.Contains(p.get(t, "/metrics"), `pylon_xds_connections_closed_total{reason="client_cert_expired"} 1`)
	}) {
		t.Errorf("the close is not counted:\n%s", grepLines(p.get(t, "/metrics"), "pylon_xds_connections_closed_total"))
	}
}
