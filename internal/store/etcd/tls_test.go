package etcd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/pylon-xds/pylon/internal/store"
)

// issue writes a key and a certificate signed by parent (self-signed when
// parent is nil) to dir, and returns the certificate and key.
func issue(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", kb)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestMutualTLS: an etcd that requires client certificates serves a store
// opened with ClientTLS and refuses one without a certificate.
func TestMutualTLS(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ca, caKey := issue(t, dir, "ca", nil, nil, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign})
	issue(t, dir, "server", ca, caKey, &x509.Certificate{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	issue(t, dir, "client", ca, caKey, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	f := func(name string) string { return filepath.Join(dir, name) }

	ports := freePorts(t, 2)
	m := &member{name: "tls", dir: t.TempDir(), peer: ports[0], cli: ports[1],
		tls: &transport.TLSInfo{CertFile: f("server.pem"), KeyFile: f("server-key.pem"), TrustedCAFile: f("ca.pem"), ClientCertAuth: true}}
	m.cluster = m.name + "=http://" + m.peer
	m.start(t, true)
	t.Cleanup(m.stop)
	m.ready(t)

	cfg, err := ClientTLS(f("client.pem"), f("client-key.pem"), f("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Endpoints: []string{"https://" + m.cli}, TLS: cfg, Prefix: "/tls"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: []byte(`1`)}}, nil, 10); err != nil {
		t.Fatalf("a commit over mutual TLS: %v", err)
	}

	anonymous, err := ClientTLS("", "", f("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Options{Endpoints: []string{"https://" + m.cli}, TLS: anonymous, Prefix: "/tls", Timeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("no client certificate: %v", err)
	}

	if _, err := ClientTLS(f("client.pem"), "", ""); err == nil || !strings.Contains(err.Error(), "--etcd-key") {
		t.Fatalf("a certificate without its key: %v", err)
	}
	if _, err := ClientTLS(f("client.pem"), f("ca-key.pem"), ""); err == nil || !strings.Contains(err.Error(), "client.pem") {
		t.Fatalf("a certificate with the wrong key: %v", err)
	}
}
