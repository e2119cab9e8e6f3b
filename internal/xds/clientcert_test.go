package xds_test

import (
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// Finding 5 (issue 30): a connection whose client certificate expires
// while it is open is closed at the expiry, its streams ended, and counted
// as client_cert_expired; a connection whose certificate is still valid
// keeps its stream, and the expired certificate cannot connect again.
func TestConnectionClosedAtCertExpiry(t *testing.T) {
	m := startMTLS(t, xds.Options{})
	// X.509 keeps whole seconds: this certificate ends 1 to 2s from now.
	short := m.ca.IssueUntil(t, time.Now().Add(2*time.Second), edgeSA+"edge-1")
	expiring := xdstest.OpenADS(t, xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(&short)), edgeNode("edge-1"))
	expiring.Request(sds, "edge-1-key")
	wantNames(t, expiring.RecvType(sds), "edge-1-key")
	expiring.Request(sds, "edge-1-key")
	kept := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-2"), edgeNode("edge-2"))
	kept.Request(cds)
	wantNames(t, kept.RecvType(cds), "secure-web")
	kept.Request(cds)

	// Err waits up to xdstest.Timeout (10s), well past the expiry.
	err := expiring.Err()
	if grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("the expired certificate's stream ended with %v, want UNAVAILABLE", err)
	}
	if left := time.Until(short.Cert.NotAfter); left > 0 {
		t.Errorf("the stream ended %v before its certificate expired", left)
	}
	closed := m.rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if closed.Reason != "client_cert_expired" {
		t.Errorf("the connection closed for %q, want client_cert_expired", closed.Reason)
	}

	// The valid certificate's stream is still served.
	kept.ExpectSilence()
	if err := xdstest.StreamErr(xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(&short)), edgeNode("edge-1")); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("reconnecting with the expired certificate: %v, want UNAVAILABLE (a failed handshake)", err)
	}
}

// Finding 5 (issue 30): when the client CAs change, the connections whose
// certificate no longer verifies are closed (client_cert_revoked), those
// whose CA stays keep their streams and their pushes, and a connection
// without a certificate is left as it was.
func TestClientCARotationClosesConnections(t *testing.T) {
	rec := newRecorder()
	oldCA, newCA := identitytest.NewCA(t, "old clients"), identitytest.NewCA(t, "new clients")
	// The TLS config trusts both CAs, then only the new one, as the
	// daemon's certs.Server does when the bundle file changes.
	var trusted atomic.Pointer[x509.CertPool]
	trusted.Store(certstest.Pool(oldCA.CA, newCA.CA))
	base := newCA.ServerConfig(t)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = trusted.Load()
		return c, nil
	}}
	srv := xdstest.StartTLS(t, xds.Options{Observer: rec}, cfg)
	srv.Publish(t, xdstest.Cluster("web"), xdstest.Endpoints("web", 1))
	open := func(ca *identitytest.CA, id string) *xdstest.Stream {
		var leaf *identitytest.Leaf
		if ca != nil {
			l := ca.Issue(t, edgeSA+id)
			leaf = &l
		}
		s := xdstest.OpenADS(t, xdstest.DialTLS(t, srv.Addr, newCA.ClientConfig(leaf)), xdstest.Node(id))
		s.Request(cds)
		wantNames(t, s.RecvType(cds), "web")
		s.Request(cds)
		return s
	}
	revoked, kept, anonymous := open(oldCA, "edge-1"), open(newCA, "edge-2"), open(nil, "edge-3")

	trusted.Store(newCA.Pool)
	srv.XDS.VerifyClients(newCA.Pool)
	if err := revoked.Err(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("the removed CA's stream ended with %v, want UNAVAILABLE", err)
	}
	closed := rec.wait(t, func(e status.Event) bool { return e.Kind == status.ConnectionClosed })
	if closed.Reason != guard.ConnClientCertRevoked {
		t.Errorf("the connection closed for %q, want %s", closed.Reason, guard.ConnClientCertRevoked)
	}
	srv.Publish(t, xdstest.Cluster("web"), xdstest.Endpoints("web", 1), xdstest.Cluster("api"), xdstest.Endpoints("api", 1))
	for _, s := range []*xdstest.Stream{kept, anonymous} {
		wantNames(t, s.RecvType(cds), "api", "web")
		s.Request(cds)
	}

	// A nil pool trusts nothing, never the system's roots.
	srv.XDS.VerifyClients(nil)
	if err := kept.Err(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("with no client CA, a verified stream ended with %v, want UNAVAILABLE", err)
	}
	anonymous.ExpectSilence()
}
