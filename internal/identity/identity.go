// Package identity turns a connection's verified client certificate into
// an identity (a SPIFFE ID and DNS names) and checks that identity against
// the node a proxy claims to be, by a rule such as
// "spiffe://{trust_domain}/ns/{cluster}/sa/{id}". Pure functions: the xDS
// server asks at stream open; nothing here knows about Pylon's fleets.
package identity

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Identity is what a verified client certificate proves.
type Identity struct {
	SPIFFE string   // the leaf certificate's spiffe:// URI SAN, "" if none
	DNS    []string // its DNS SANs
	// verified is set when the certificate chained to a trusted CA: a
	// verified certificate may name nothing, and that is still a proof
	// that the client holds a key the operator's CA issued.
	verified bool
}

// FromContext returns what the connection's verified client certificate
// proves; the zero Identity when there is none (plaintext, no certificate,
// or a certificate that was not verified).
func FromContext(ctx context.Context) Identity {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Identity{}
	}
	var state tls.ConnectionState
	switch ai := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		state = ai.State
	case *credentials.TLSInfo:
		state = ai.State
	default:
		return Identity{}
	}
	return FromState(state)
}

// FromState returns what a TLS connection's verified client certificate
// proves. Only a verified chain counts: PeerCertificates alone are what the
// client sent, not what it proved (tls.RequestClientCert and friends fill
// them in without verification).
func FromState(state tls.ConnectionState) Identity {
	if len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return Identity{}
	}
	leaf := state.VerifiedChains[0][0]
	id := Identity{DNS: slices.Clone(leaf.DNSNames), verified: true}
	spiffes := 0
	for _, u := range leaf.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffes++
			id.SPIFFE = u.String()
		}
	}
	if spiffes > 1 {
		// An X.509 SVID carries exactly one SPIFFE ID (SPIFFE X509-SVID
		// spec, 2); a certificate with several proves none of them.
		id.SPIFFE = ""
	}
	return id
}

// Verified reports whether the identity comes from a verified certificate.
func (id Identity) Verified() bool { return id.verified }

// Names returns the names the identity proves, SPIFFE first, then DNS: what
// group and secret policies match against. Nil when unverified.
//
// Policies match every pattern against every name, so a DNS SAN that could
// be mistaken for a URI is left out: x509 lets a dNSName hold any IA5 text,
// and a CA that signs "spiffe://example.org/ns/payments/sa/gateway-1" as a
// DNS name must not satisfy a SPIFFE policy. A real DNS name holds neither
// ':' nor '/'.
func (id Identity) Names() []string {
	if !id.verified {
		return nil
	}
	out := make([]string, 0, 1+len(id.DNS))
	if id.SPIFFE != "" {
		out = append(out, id.SPIFFE)
	}
	for _, d := range id.DNS {
		if !strings.ContainsAny(d, ":/") {
			out = append(out, d)
		}
	}
	return out
}

// maxShown bounds the DNS names String lists: a certificate may carry many.
const maxShown = 4

// String describes the identity for logs and status.
func (id Identity) String() string {
	if !id.verified {
		return "no verified client certificate"
	}
	var parts []string
	if id.SPIFFE != "" {
		parts = append(parts, id.SPIFFE)
	}
	dns := id.DNS
	more := 0
	if len(dns) > maxShown {
		dns, more = dns[:maxShown], len(dns)-maxShown
	}
	if len(dns) > 0 {
		s := "DNS " + strings.Join(dns, ", ")
		if more > 0 {
			s += fmt.Sprintf(" (and %d more)", more)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "a verified certificate with no SPIFFE ID or DNS name"
	}
	return strings.Join(parts, "; ")
}
