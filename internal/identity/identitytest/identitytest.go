// Package identitytest makes certificates for tests: a CA, client
// certificates with SPIFFE and DNS SANs, and the TLS configs of a server
// that verifies them and of a client that presents them. Keys are ECDSA
// P-256, made fresh for every test, never written to disk.
package identitytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool
	key  *ecdsa.PrivateKey
}

// NewCA returns a fresh CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, key: key}
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
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "pylon test leaf"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if spiffe != "" {
		u, err := url.Parse(spiffe)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return Leaf{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, Cert: cert}
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

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
