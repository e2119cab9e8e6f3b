// Package ca is a small certificate authority for getting started with
// mutual TLS: it makes a CA (ECDSA P-256) in a folder, and issues from it
// client certificates bound to a node by the same identity rule the xDS
// server checks, and server certificates for Pylon's own ports.
//
// Files are named predictably (ca.pem, ca-key.pem, NAME.pem, NAME-key.pem),
// keys are written readable by their owner alone, and no file is replaced
// unless asked: a CA replaced by mistake invalidates every certificate it
// issued. Nothing here prints or returns key material; errors name files,
// never their contents.
package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/identity"
)

// The CA's file names in its folder.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
)

// Default validities: a CA outlives its certificates; a client certificate
// is short-lived, so a leaked one is not a key to the fleet for long.
const (
	DefaultCAValidity     = 10 * 365 * 24 * time.Hour
	DefaultClientValidity = 30 * 24 * time.Hour
	DefaultServerValidity = 90 * 24 * time.Hour
)

// maxValidity bounds any validity asked for: beyond it a typo (a year
// count in hours) is more likely than an intent.
const maxValidity = 100 * 365 * 24 * time.Hour

// backdate is how far before now a certificate becomes valid, so that a
// peer whose clock is slightly behind accepts it at once.
const backdate = 5 * time.Minute

// InitOptions describe a new CA.
type InitOptions struct {
	Dir string
	// TrustDomain, when set, is written into the CA certificate as its
	// SPIFFE ID (spiffe://TRUST_DOMAIN) and is the default trust domain of
	// the certificates it issues.
	TrustDomain string
	Validity    time.Duration // 0: DefaultCAValidity
	Force       bool          // replace an existing CA
	Now         func() time.Time
}

// Issued describes written files: what a command tells its user.
type Issued struct {
	CertFile, KeyFile string
	// Names are the certificate's subject alternative names (a SPIFFE ID,
	// DNS names, IP addresses), as text.
	Names    []string
	NotAfter time.Time
}

// Init makes a CA in o.Dir (created 0700 if missing).
func Init(o InitOptions) (Issued, error) {
	now := clock(o.Now)
	validity, err := checkValidity(o.Validity, DefaultCAValidity)
	if err != nil {
		return Issued{}, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "Pylon CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs leaves, never another CA
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	if o.TrustDomain != "" {
		if err := checkTrustDomain(o.TrustDomain); err != nil {
			return Issued{}, err
		}
		tmpl.Subject.CommonName = "Pylon CA " + o.TrustDomain
		tmpl.URIs = []*url.URL{{Scheme: "spiffe", Host: o.TrustDomain}}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return Issued{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Issued{}, fmt.Errorf("making the CA certificate: %w", err)
	}
	out := Issued{CertFile: filepath.Join(o.Dir, CertFile), KeyFile: filepath.Join(o.Dir, KeyFile), NotAfter: tmpl.NotAfter}
	if o.TrustDomain != "" {
		out.Names = []string{tmpl.URIs[0].String()}
	}
	return out, writePair(o.Dir, CertFile, KeyFile, der, key, o.Force)
}

// checkTrustDomain checks a trust domain as the server does, by parsing
// a rule that uses it.
func checkTrustDomain(trustDomain string) error {
	if _, err := identity.ParseRule(DefaultRule, trustDomain); err != nil {
		return fmt.Errorf("--trust-domain: %w", errors.Unwrap(err))
	}
	return nil
}

func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

func checkValidity(v, def time.Duration) (time.Duration, error) {
	switch {
	case v == 0:
		return def, nil
	case v < time.Minute:
		return 0, fmt.Errorf("--validity %v: want at least a minute", v)
	case v > maxValidity:
		return 0, fmt.Errorf("--validity %v: want at most 100 years", v)
	}
	return v, nil
}

// serial is a random 127-bit serial number: positive, unpredictable and,
// in practice, unique (RFC 5280 4.1.2.2 allows up to 20 octets).
func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// checkName accepts a file base name: letters, digits, '.', '-' and '_',
// not starting with '.', so that NAME.pem stays in the folder and is not
// hidden. The CA's own names are reserved.
func checkName(name string) error {
	// NAME.pem and NAME-key.pem must never be the CA's own files: "ca-key"
	// would write a leaf certificate over the CA's key.
	if name == "" || len(name) > 128 || name[0] == '.' || name == "ca" || name == "ca-key" {
		return fmt.Errorf("--name %q: want 1 to 128 letters, digits, '.', '-' or '_', not starting with '.', and not \"ca\" or \"ca-key\" (the CA's files)", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("--name %q: want 1 to 128 letters, digits, '.', '-' or '_', not starting with '.', and not \"ca\" or \"ca-key\" (the CA's files)", name)
		}
	}
	return nil
}

// certPEM encodes a certificate.
func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// names lists a certificate's SANs as text, SPIFFE ID first.
func names(c *x509.Certificate) []string {
	var out []string
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	out = append(out, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// describe is a certificate's SANs for an error message.
func describe(c *x509.Certificate) string {
	if n := names(c); len(n) > 0 {
		return strings.Join(n, ", ")
	}
	return "no names"
}
