package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/identity"
)

// DefaultRule is the identity rule a client certificate is issued for when
// none is given: the one docs/security.md runs Pylon with.
const DefaultRule = "spiffe://{trust_domain}/ns/{cluster}/sa/{id}"

// ClientOptions describe a node's client certificate.
type ClientOptions struct {
	Dir             string
	NodeID, Cluster string
	// Rule is the server's --node-identity template ("": DefaultRule) and
	// TrustDomain its --trust-domain ("": the CA's).
	Rule, TrustDomain string
	// DNS are further DNS SANs, for policies that match them.
	DNS []string
	// Name names the files NAME.pem and NAME-key.pem ("": the node id).
	Name     string
	Validity time.Duration // 0: DefaultClientValidity
	Force    bool
	Now      func() time.Time
}

// IssueClient issues a client certificate that proves, by the rule, the
// node's id and cluster: the name the rule wants, as a SPIFFE URI SAN or a
// DNS SAN. A node the rule cannot bind is refused with the server's own
// error, and the certificate is checked by the server's own code before it
// is written.
func IssueClient(o ClientOptions) (Issued, error) {
	now := clock(o.Now)
	validity, err := checkValidity(o.Validity, DefaultClientValidity)
	if err != nil {
		return Issued{}, err
	}
	a, err := load(o.Dir, now)
	if err != nil {
		return Issued{}, err
	}
	rule, err := a.rule(o.Rule, o.TrustDomain)
	if err != nil {
		return Issued{}, err
	}
	want, err := rule.Want(o.NodeID, o.Cluster)
	if err != nil {
		return Issued{}, err
	}
	name := o.Name
	if name == "" {
		name = o.NodeID
	}
	if err := checkName(name); err != nil {
		return Issued{}, fmt.Errorf("%w (the files are named after the node id unless --name says otherwise)", err)
	}
	tmpl := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if rule.SPIFFE() {
		u, err := url.Parse(want)
		if err != nil {
			return Issued{}, err
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.DNSNames = []string{want}
	}
	for _, d := range o.DNS {
		if err := checkDNS(d, false); err != nil {
			return Issued{}, err
		}
		if !rule.SPIFFE() && nodeName(rule, a.trustDomainOr(o.TrustDomain), d) {
			if d == want {
				continue
			}
			return Issued{}, fmt.Errorf("--dns %s: the rule %q reads it as another node's name, and a certificate must prove one node", d, rule)
		}
		tmpl.DNSNames = append(tmpl.DNSNames, d)
	}
	tmpl.Subject.CommonName = commonName(o.NodeID, want)
	der, key, err := a.sign(tmpl, now, validity)
	if err != nil {
		return Issued{}, err
	}
	if err := a.proves(der, rule, o.NodeID, o.Cluster, now); err != nil {
		return Issued{}, err
	}
	return a.write(o.Dir, name, der, key, o.Force)
}

// rule parses the server's rule with the trust domain given, else the
// CA's. A trust domain other than the CA's is refused: a verifier of one
// trust domain trusts one CA for it.
func (a *authority) rule(template, trustDomain string) (*identity.Rule, error) {
	if template == "" {
		template = DefaultRule
	}
	if trustDomain == "" {
		trustDomain = a.trustDomain
	} else if a.trustDomain != "" && trustDomain != a.trustDomain {
		return nil, fmt.Errorf("--trust-domain %s: this CA is for trust domain %s", trustDomain, a.trustDomain)
	}
	rule, err := identity.ParseRule(template, trustDomain)
	if err != nil && trustDomain == "" && strings.Contains(template, "{trust_domain}") {
		return nil, fmt.Errorf("%w: pass --trust-domain, as to `pylon serve`, or make the CA with one", err)
	}
	return rule, err
}

func (a *authority) trustDomainOr(td string) string {
	if td == "" {
		return a.trustDomain
	}
	return td
}

// nodeName reports whether a DNS rule reads name as some node's: label by
// label, each {id} or {cluster} any label and every other label the
// template's own. ParseRule has made every placeholder a whole label, so
// this is exact.
func nodeName(rule *identity.Rule, trustDomain, name string) bool {
	tmpl := strings.Split(strings.ReplaceAll(rule.String(), "{trust_domain}", trustDomain), ".")
	labels := strings.Split(name, ".")
	if len(tmpl) != len(labels) {
		return false
	}
	for i, l := range tmpl {
		if l != "{id}" && l != "{cluster}" && !strings.EqualFold(l, labels[i]) {
			return false
		}
	}
	return true
}

// proves checks the certificate as the server will: verified against the
// CA for client auth, then the identity rule for the node.
func (a *authority) proves(der []byte, rule *identity.Rule, nodeID, cluster string, now time.Time) error {
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	chains, err := certs.VerifyClient([]*x509.Certificate{leaf}, pool, now)
	if err != nil {
		return fmt.Errorf("the issued certificate does not verify against the CA: %w", err)
	}
	id := identity.FromState(tls.ConnectionState{VerifiedChains: chains})
	if err := rule.Check(id, nodeID, cluster); err != nil {
		return fmt.Errorf("the issued certificate (%s) would be refused: %w", describe(leaf), err)
	}
	return nil
}

// ServerOptions describe a certificate for Pylon's own xDS or admin port.
type ServerOptions struct {
	Dir string
	// DNS and IPs are the names clients dial; at least one.
	DNS []string
	IPs []net.IP
	// Peer makes the certificate good for client auth too: for a server
	// that dials its peers with the certificate it serves with, as an
	// etcd member does on its peer port (--peer-cert-file).
	Peer bool
	// Name names the files NAME.pem and NAME-key.pem ("": "server").
	Name     string
	Validity time.Duration // 0: DefaultServerValidity
	Force    bool
	Now      func() time.Time
}

// IssueServer issues a server certificate for the given names.
func IssueServer(o ServerOptions) (Issued, error) {
	now := clock(o.Now)
	validity, err := checkValidity(o.Validity, DefaultServerValidity)
	if err != nil {
		return Issued{}, err
	}
	if len(o.DNS) == 0 && len(o.IPs) == 0 {
		return Issued{}, fmt.Errorf("a server certificate needs the names clients dial: --dns NAME or --ip ADDRESS, at least one")
	}
	name := o.Name
	if name == "" {
		name = "server"
	}
	if err := checkName(name); err != nil {
		return Issued{}, err
	}
	for _, d := range o.DNS {
		if err := checkDNS(d, true); err != nil {
			return Issued{}, err
		}
	}
	a, err := load(o.Dir, now)
	if err != nil {
		return Issued{}, err
	}
	tmpl := &x509.Certificate{
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    o.DNS,
		IPAddresses: o.IPs,
	}
	if o.Peer {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if len(o.DNS) > 0 {
		tmpl.Subject.CommonName = o.DNS[0]
	} else {
		tmpl.Subject.CommonName = o.IPs[0].String()
	}
	der, key, err := a.sign(tmpl, now, validity)
	if err != nil {
		return Issued{}, err
	}
	return a.write(o.Dir, name, der, key, o.Force)
}

// sign fills in what every leaf has (a fresh key, a serial, validity
// within the CA's, a signature usage) and signs it.
func (a *authority) sign(tmpl *x509.Certificate, now time.Time, validity time.Duration) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(a.cert.NotAfter) {
		tmpl.NotAfter = a.cert.NotAfter // a certificate cannot outlive its CA
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate: %w", err)
	}
	return der, key, nil
}

func (a *authority) write(dir, name string, der []byte, key *ecdsa.PrivateKey, force bool) (Issued, error) {
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Issued{}, err
	}
	out := Issued{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem"), Names: names(leaf), NotAfter: leaf.NotAfter}
	return out, writePair(dir, name+".pem", name+"-key.pem", der, key, force)
}

// commonName is the node id when it fits a Common Name (at most 64
// characters, RFC 5280), else the name the certificate proves, cut.
func commonName(nodeID, want string) string {
	switch {
	case nodeID != "" && len(nodeID) <= 64:
		return nodeID
	case len(want) <= 64:
		return want
	}
	return want[:64]
}

// checkDNS accepts a DNS name of letter-digit-hyphen labels (lower case:
// DNS names compare without case, and policies are written in lower
// case), and, for a server, a leading "*." wildcard label.
func checkDNS(name string, wildcard bool) error {
	labels := strings.Split(name, ".")
	if wildcard && len(labels) > 2 && labels[0] == "*" {
		labels = labels[1:]
	}
	ok := name != "" && len(name) <= 253
	for _, l := range labels {
		ok = ok && l != "" && len(l) <= 63 && l[0] != '-' && l[len(l)-1] != '-'
		for i := 0; ok && i < len(l); i++ {
			c := l[i]
			ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
		}
	}
	if !ok {
		what := "lower-case letters, digits and '-' in dot-separated labels of at most 63"
		if wildcard {
			what += ", optionally after \"*.\""
		}
		return fmt.Errorf("--dns %s: not a DNS name: want %s", identity.Quote(name), what)
	}
	return nil
}
