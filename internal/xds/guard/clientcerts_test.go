package guard

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/pylon-xds/pylon/internal/identity/identitytest"
)

// A handshake that began before the client CAs changed, and so may have
// verified against the old ones, is verified again against the new ones
// before it serves; one that began after is taken as its handshake
// verified it.
func TestHandshakeRacingCARotationVerifiedAgain(t *testing.T) {
	oldCA, newCA := identitytest.NewCA(t, "old clients"), identitytest.NewCA(t, "new clients")
	leaf := oldCA.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")
	state := tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf.Cert},
		VerifiedChains:   [][]*x509.Certificate{{leaf.Cert, oldCA.Cert}},
	}
	var reg Conns
	before := reg.cas.gen.Load()
	reg.cas.pool.Store(newCA.Pool)
	reg.cas.gen.Add(1)

	raced := &Conn{reg: &reg}
	if got := raced.verified(state, before); got != ConnClientCertRevoked {
		t.Errorf("a handshake that raced the change: %q, want %s", got, ConnClientCertRevoked)
	}
	raced.cert.stop()
	after := &Conn{reg: &reg}
	if got := after.verified(state, reg.cas.gen.Load()); got != "" {
		t.Errorf("a handshake that began after the change: %q, want it kept", got)
	}
	after.cert.stop()
}
