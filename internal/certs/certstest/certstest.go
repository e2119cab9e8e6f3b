// Package certstest makes throwaway certificate authorities and
// certificates for tests: a CA, server certificates for loopback and client
// certificates with SPIFFE URI SANs, written as PEM files.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA makes a CA named name.
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
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf is what a certificate names.
type Leaf struct {
	CommonName string
	DNS        []string
	IPs        []net.IP
	URIs       []string // e.g. spiffe://example.org/ns/edge/sa/edge-1
	Client     bool     // client auth usage (default: server auth)
	// Both gives the certificate client and server auth usage.
	Both bool
	// NotAfter ends the certificate's validity (zero: a day from now); a
	// test of expiry issues one that ends within seconds.
	NotAfter time.Time
}

// Server names 127.0.0.1, ::1 and localhost.
func Server(cn string) Leaf {
	return Leaf{CommonName: cn, DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
}

// Client is a client certificate with one URI SAN.
func Client(uri string) Leaf { return Leaf{CommonName: "client", URIs: []string{uri}, Client: true} }

// Pair is an issued certificate and its key in PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Issue signs a certificate for l.
func (ca *CA) Issue(t testing.TB, l Leaf) Pair {
	t.Helper()
	key := newKey(t)
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(24 * time.Hour)
	}
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	switch {
	case l.Both:
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	case l.Client:
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: l.CommonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		DNSNames:     l.DNS,
		IPAddresses:  l.IPs,
	}
	for _, u := range l.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
	}
}

// Files are the paths a pair (and its CA) were written to.
type Files struct{ Cert, Key, CA string }

// Write writes the pair and ca's certificate into dir as name.crt, name.key
// and name-ca.crt, replacing earlier files by rename as rotation tools do.
func (p Pair) Write(t testing.TB, ca *CA, dir, name string) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, name+"-ca.crt")}
	WriteFile(t, f.Cert, p.CertPEM)
	WriteFile(t, f.Key, p.KeyPEM)
	WriteFile(t, f.CA, ca.PEM)
	return f
}

// WriteFile replaces path atomically (a temporary file renamed over it).
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Pool is a cert pool holding the given CAs.
func Pool(cas ...*CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// KeyPEM is a fresh EC private key as PKCS#8 PEM, and its DER: a real key
// for tests that plant one and check it is never shown.
func KeyPEM(t testing.TB) (pemText string, der []byte) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), der
}
