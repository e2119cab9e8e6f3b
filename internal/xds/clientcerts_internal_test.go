package xds

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/identity/identitytest"
)

// Finding 5 (issue 30): a handshake that began before the client CAs
// changed, and so may have verified against the old ones, is verified
// again against the new ones before it serves; one that began after is
// taken as its handshake verified it.
func TestFinding5_HandshakeRacingCARotationVerifiedAgain(t *testing.T) {
	oldCA, newCA := identitytest.NewCA(t, "old clients"), identitytest.NewCA(t, "new clients")
	leaf := oldCA.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")
	state := tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{leaf.Cert},
		VerifiedChains:   [][]*x509.Certificate{{leaf.Cert, oldCA.Cert}},
	}
	var reg conns
	before := reg.cas.gen.Load()
	reg.cas.pool.Store(newCA.Pool)
	reg.cas.gen.Add(1)

	raced := &trackedConn{reg: &reg}
	if got := raced.verified(state, before); got != ConnClientCertRevoked {
		t.Errorf("a handshake that raced the change: %q, want %s", got, ConnClientCertRevoked)
	}
	raced.cert.stop()
	after := &trackedConn{reg: &reg}
	if got := after.verified(state, reg.cas.gen.Load()); got != "" {
		t.Errorf("a handshake that began after the change: %q, want it kept", got)
	}
	after.cert.stop()
}

// A connection's certificate stops verifying when the first certificate
// of its chain expires, or, with several chains, when the last chain does.
func TestExpiryOfChains(t *testing.T) {
	at := func(h int) *x509.Certificate {
		return &x509.Certificate{NotAfter: time.Date(2030, 1, 1, h, 0, 0, 0, time.UTC)}
	}
	for _, c := range []struct {
		chains [][]*x509.Certificate
		want   int
	}{
		{[][]*x509.Certificate{{at(5), at(9)}}, 5},
		{[][]*x509.Certificate{{at(9), at(3)}}, 3},
		{[][]*x509.Certificate{{at(9), at(3)}, {at(9), at(7), at(8)}}, 7},
	} {
		if got := expiryOf(c.chains); got.Hour() != c.want {
			t.Errorf("%d chains: expire at %v, want hour %d", len(c.chains), got, c.want)
		}
	}
}
