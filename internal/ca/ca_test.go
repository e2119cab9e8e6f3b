package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/identity"
)

func newCA(t *testing.T, trustDomain string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := Init(InitOptions{Dir: dir, TrustDomain: trustDomain}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// leaf reads an issued certificate and its key as a pair.
func leaf(t *testing.T, out Issued) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(out.CertFile, out.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// proof is what the server sees of a client certificate: verified against
// the CA for client auth, then read as an identity.
func proof(t *testing.T, dir string, c *x509.Certificate) identity.Identity {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	chains, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatalf("the issued certificate does not verify as a client's: %v", err)
	}
	return identity.FromState(tls.ConnectionState{VerifiedChains: chains})
}

// The certificate proves what the server's rule wants of the node, and
// nothing that would pass for another node.
func TestIssueClientProvesNodeByRule(t *testing.T) {
	for _, c := range []struct{ rule, trustDomain, want string }{
		{"", "", "spiffe://example.org/ns/edge/sa/edge-1"},
		{"spiffe://{trust_domain}/{cluster}/{id}", "example.org", "spiffe://example.org/edge/edge-1"},
		{"{id}.{cluster}.proxies.example.com", "", "edge-1.edge.proxies.example.com"},
	} {
		dir := newCA(t, "example.org")
		out, err := IssueClient(ClientOptions{Dir: dir, NodeID: "edge-1", Cluster: "edge", Rule: c.rule, TrustDomain: c.trustDomain})
		if err != nil {
			t.Fatalf("%q: %v", c.rule, err)
		}
		if len(out.Names) != 1 || out.Names[0] != c.want {
			t.Errorf("%q: names %v, want %s", c.rule, out.Names, c.want)
		}
		cert := leaf(t, out)
		if time.Until(cert.NotAfter) > DefaultClientValidity || len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
			t.Errorf("%q: until %v, usages %v", c.rule, cert.NotAfter, cert.ExtKeyUsage)
		}
		rule, err := identity.ParseRule(orDefault(c.rule), "example.org")
		if err != nil {
			t.Fatal(err)
		}
		id := proof(t, dir, cert)
		if err := rule.Check(id, "edge-1", "edge"); err != nil {
			t.Errorf("%q: the server refuses the node's own certificate: %v", c.rule, err)
		}
		if rule.Check(id, "edge-2", "edge") == nil || rule.Check(id, "edge-1", "web") == nil {
			t.Errorf("%q: the certificate proves another node too", c.rule)
		}
	}
}

func orDefault(rule string) string {
	if rule == "" {
		return DefaultRule
	}
	return rule
}

// The CA is a P-256 CA that signs leaves only, with the trust domain as
// its SPIFFE ID; its key is its owner's alone.
func TestInitMakesConstrainedCA(t *testing.T) {
	dir := newCA(t, "example.org")
	b, _ := os.ReadFile(filepath.Join(dir, CertFile))
	block, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !cert.IsCA || !cert.MaxPathLenZero || cert.MaxPathLen != 0 || !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("CA: IsCA %v, MaxPathLen %d (zero %v), key %T", cert.IsCA, cert.MaxPathLen, cert.MaxPathLenZero, cert.PublicKey)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://example.org" {
		t.Errorf("CA URIs %v", cert.URIs)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life < DefaultCAValidity {
		t.Errorf("CA valid for %v", life)
	}
	for name, mode := range map[string]os.FileMode{KeyFile: 0o600, ".": 0o700} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v, want mode %#o", name, fi, err, mode)
		}
	}
	if _, err := Init(InitOptions{Dir: t.TempDir(), TrustDomain: "Example.org"}); err == nil || !strings.Contains(err.Error(), "lower-case") {
		t.Errorf("upper-case trust domain: %v", err)
	}
}

// A CA key others can read is refused before it signs anything, and no
// error quotes a key file's contents.
func TestLoadRefusesExposedOrBadKey(t *testing.T) {
	dir := newCA(t, "example.org")
	keyPath := filepath.Join(dir, KeyFile)
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := IssueClient(ClientOptions{Dir: dir, NodeID: "edge-1", Cluster: "edge"})
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable CA key: %v", err)
	}
	os.Chmod(keyPath, 0o600)
	key, _ := os.ReadFile(keyPath)
	lines := strings.Split(string(key), "\n")
	garbled := lines[0] + "\n" + lines[1][:20] + "!!" + lines[1][22:] + "\n" + strings.Join(lines[2:], "\n")
	if err := os.WriteFile(keyPath, []byte(garbled), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = IssueClient(ClientOptions{Dir: dir, NodeID: "edge-1", Cluster: "edge"})
	if err == nil || strings.Contains(err.Error(), lines[1][:16]) || strings.Contains(err.Error(), "PRIVATE KEY-") {
		t.Fatalf("garbled CA key: %v", err)
	}
	other := newCA(t, "example.org")
	b, _ := os.ReadFile(filepath.Join(other, KeyFile))
	os.WriteFile(keyPath, b, 0o600)
	if _, err = IssueClient(ClientOptions{Dir: dir, NodeID: "edge-1", Cluster: "edge"}); err == nil || !strings.Contains(err.Error(), "does not hold the key") {
		t.Fatalf("another CA's key: %v", err)
	}
	if _, err = IssueClient(ClientOptions{Dir: t.TempDir(), NodeID: "edge-1", Cluster: "edge"}); err == nil || !strings.Contains(err.Error(), "pylon certs init") {
		t.Fatalf("no CA: %v", err)
	}
}

// No certificate outlives its CA.
func TestValidityCappedByCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := Init(InitOptions{Dir: dir, TrustDomain: "example.org", Validity: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	out, err := IssueServer(ServerOptions{Dir: dir, DNS: []string{"localhost"}, Validity: 24 * 365 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if until := time.Until(out.NotAfter); until > 48*time.Hour || until < 47*time.Hour {
		t.Errorf("server certificate valid for %v, want the CA's 48h", until)
	}
	if _, err := Init(InitOptions{Dir: t.TempDir(), Validity: time.Second}); err == nil {
		t.Error("a CA valid for a second")
	}
}

// Bad names are refused before any file is written: a trust domain other
// than the CA's, a file name that would leave the folder (a rule without
// {id} checks no node id), a client wildcard, a server with no name.
func TestIssueRefusals(t *testing.T) {
	dir := newCA(t, "example.org")
	for _, c := range []struct {
		o    ClientOptions
		want string
	}{
		{ClientOptions{NodeID: "edge-1", Cluster: "edge", TrustDomain: "other.org"}, "this CA is for trust domain example.org"},
		{ClientOptions{NodeID: "../edge-1", Cluster: "edge", Rule: "{cluster}.proxies.example.com"}, "--name"},
		{ClientOptions{NodeID: "ca", Cluster: "edge"}, "--name"},
		{ClientOptions{NodeID: "ca-key", Cluster: "edge", Force: true}, "--name"},
		{ClientOptions{NodeID: "edge-1", Cluster: "edge", DNS: []string{"*.example.com"}}, "not a DNS name"},
		{ClientOptions{NodeID: "edge-1", Cluster: "edge", DNS: []string{"spiffe://example.org/ns/edge/sa/edge-2"}}, "not a DNS name"},
		{ClientOptions{NodeID: "edge-1", Cluster: "edge", Rule: "{id}.{cluster}.proxies.example.com", DNS: []string{"edge-2.edge.proxies.example.com"}}, "another node's name"},
		{ClientOptions{NodeID: "edge-1", Cluster: "edge", Rule: "{id}.{cluster}.proxies.example.com", DNS: []string{"edge-1.web.Proxies.example.com"}}, "not a DNS name"},
	} {
		c.o.Dir = dir
		if _, err := IssueClient(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	dns, err := IssueClient(ClientOptions{Dir: dir, NodeID: "edge-3", Cluster: "edge", Rule: "{id}.{cluster}.proxies.example.com",
		DNS: []string{"edge-3.edge.proxies.example.com", "gw.example.com"}})
	if err != nil || strings.Join(dns.Names, " ") != "edge-3.edge.proxies.example.com gw.example.com" {
		t.Errorf("a DNS rule's certificate with its own name and another: %v, %v", dns.Names, err)
	}
	if _, err := IssueServer(ServerOptions{Dir: dir, Name: "ca-key", DNS: []string{"x.example.com"}, Force: true}); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Errorf("a server certificate named ca-key, forced over the CA's key: %v", err)
	}
	if _, err := IssueServer(ServerOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "--dns") {
		t.Errorf("server without names: %v", err)
	}
	out, err := IssueServer(ServerOptions{Dir: dir, DNS: []string{"*.pylon.example.com"}, IPs: []net.IP{net.IPv6loopback}})
	if err != nil {
		t.Fatal(err)
	}
	if c := leaf(t, out); c.VerifyHostname("a.pylon.example.com") != nil || c.VerifyHostname("::1") != nil {
		t.Errorf("server names %v", out.Names)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		t.Errorf("files in the CA folder: %v; want the CA's, edge-3's and the server's", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "edge-1.pem")); err == nil {
		t.Error("a file was written outside the CA folder")
	}
}

// A peer's certificate verifies both as a server's for the names it
// carries and as a client's (etcd's members dial each other with the
// certificate they serve with); a plain server certificate is no client's.
func TestIssueServerForPeersAuthenticatesBothEnds(t *testing.T) {
	dir := newCA(t, "")
	b, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	for _, peer := range []bool{true, false} {
		out, err := IssueServer(ServerOptions{Dir: dir, Name: "etcd", DNS: []string{"etcd", "etcd-0.etcd"}, Peer: peer, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		c := leaf(t, out)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "etcd-0.etcd", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("peer %v: not a server's certificate for etcd-0.etcd: %v", peer, err)
		}
		_, err = certs.VerifyClient([]*x509.Certificate{c}, pool, time.Now())
		if peer && err != nil {
			t.Errorf("a peer's certificate does not verify as a client's: %v (usages %v)", err, c.ExtKeyUsage)
		}
		if !peer && err == nil {
			t.Errorf("a server's certificate verifies as a client's (usages %v)", c.ExtKeyUsage)
		}
		if c.Subject.CommonName != "etcd" {
			t.Errorf("peer %v: common name %q, want the first DNS name (etcd's --peer-cert-allowed-cn)", peer, c.Subject.CommonName)
		}
	}
}
