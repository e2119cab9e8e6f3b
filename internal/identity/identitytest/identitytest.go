// Package identitytest gives the xDS and identity tests what they need of
// a test CA: client certificates with SPIFFE and DNS SANs, and the TLS
// configs of a server that verifies them and of a client that presents
// them. Certificates come from certstest (one test CA for the project);
// keys are made fresh for every test and never written to disk.
package identitytest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// CA is a test certificate authority.
type CA struct {
	*certstest.CA
	Pool *x509.CertPool
}

// NewCA returns a fresh CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca := certstest.NewCA(t, name)
	return &CA{CA: ca, Pool: certstest.Pool(ca)}
}

// Leaf is an issued certificate: the tls form and the parsed leaf.
type Leaf struct {
	TLS  tls.Certificate
	Cert *x509.Certificate
}

// Issue returns a certificate for client and server use with the given
// SPIFFE ID ("" for none) and DNS names; 127.0.0.1 is always an IP SAN so
// that it also serves a loopback server.
func (ca *CA) Issue(t testing.TB, spiffe string, dns ...string) Leaf {
	t.Helper()
	return ca.IssueUntil(t, time.Time{}, spiffe, dns...)
}

// IssueUntil is Issue with the certificate valid until notAfter (zero: a
// day from now). X.509 keeps whole seconds: the certificate ends at
// notAfter truncated to the second.
func (ca *CA) IssueUntil(t testing.TB, notAfter time.Time, spiffe string, dns ...string) Leaf {
	t.Helper()
	l := certstest.Leaf{CommonName: "pylon test leaf", DNS: dns, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Both: true, NotAfter: notAfter}
	if spiffe != "" {
		l.URIs = []string{spiffe}
	}
	p := ca.CA.Issue(t, l)
	return Leaf{TLS: p.TLS(t), Cert: p.Cert}
}

// ServerConfig is a loopback server's TLS config: it presents a
// certificate of ca and verifies client certificates against ca when
// given, accepting clients without one (the xDS server decides what those
// get).
func (ca *CA) ServerConfig(t testing.TB) *tls.Config {
	t.Helper()
	leaf := ca.Issue(t, "", "localhost")
	return &tls.Config{
		Certificates: []tls.Certificate{leaf.TLS},
		ClientCAs:    ca.Pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS13,
	}
}

// ClientConfig is a client's TLS config trusting ca for the server and
// presenting leaf (nil: no client certificate).
func (ca *CA) ClientConfig(leaf *Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS13}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.TLS}
	}
	return c
}
