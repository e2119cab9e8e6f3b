package relay_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// With proxies bound to their certificates (--node-identity), a claim the
// certificate does not prove is refused before the relay keys it: it
// opens no upstream stream with the relay's identity, fetches nothing and
// takes none of --max-keys, so it cannot lock out the entitled proxies.
func TestRelayRefusedClaimOpensNoKey(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "ca")
	server := ca.Issue(t, certstest.Server("relay")).Write(t, ca, dir, "server")
	east := ca.Issue(t, certstest.Client("spiffe://example.org/ns/east/sa/p1"))
	addr := startGCP(t, "east", "west", "k1", "k2")

	got := make(chan *relay.Relay, 1)
	ready := make(chan string, 1)
	o := daemon.Options{
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DataDir: t.TempDir(), Identifier: "relay-bind",
		XDSTLS:               daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA},
		XDSRequireClientCert: true,
		NodeIdentity:         "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", TrustDomain: "example.org",
		OnReady: func(x, _ string) { ready <- x },
	}
	ro := daemon.RelayOptions{Upstreams: []string{addr}, ID: "relay-test", Key: "{cluster}", MaxKeys: 2,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Relay: func(r *relay.Relay) { got <- r }}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- daemon.RunRelay(ctx, o, ro) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	var xdsAddr string
	select {
	case xdsAddr = <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	rl := <-got
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	conn := xdstest.DialTLS(t, xdsAddr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{east.TLS(t)}, ServerName: "localhost"})
	for _, claim := range []string{"west", "k1", "k2"} {
		s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "p1", Cluster: claim})
		s.Subscribe(xdstype.ClusterURL, "*")
		if _, err := s.NextWithin(5 * time.Second); grpcstatus.Code(err) != codes.PermissionDenied {
			t.Fatalf("a claim of cluster %s with east's certificate: %v, want PermissionDenied", claim, err)
		}
	}
	if keys := rl.Keys(); len(keys) != 0 {
		t.Fatalf("claims the identity rule refused opened keys %+v (upstream streams with the relay's identity)", keys)
	}
	ok := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "p1", Cluster: "east"})
	ok.Subscribe(xdstype.ClusterURL, "*")
	if _, err := ok.NextWithin(xdstest.Timeout); err != nil {
		t.Fatalf("the entitled east proxy, after refused claims: %v", err)
	}
}
