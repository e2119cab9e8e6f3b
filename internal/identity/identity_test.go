package identity_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// handshake runs a real TLS handshake over an in-memory pipe and returns
// the server's view of the connection.
func handshake(t *testing.T, server, client *tls.Config) tls.ConnectionState {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	// A failed handshake writes an alert nobody reads on a pipe: bound it.
	deadline := time.Now().Add(10 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	srv, cli := tls.Server(a, server), tls.Client(b, client)
	errc := make(chan error, 1)
	go func() { errc <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	return srv.ConnectionState()
}

func ctxWith(state tls.ConnectionState) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
		AuthInfo: credentials.TLSInfo{State: state},
	})
}

func TestFromContext(t *testing.T) {
	ca := identitytest.NewCA(t, "test CA")
	other := identitytest.NewCA(t, "another CA")
	spiffe := ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")
	dns := ca.Issue(t, "", "edge-1.edge.proxies.example.com", "alt.example.com")
	both := ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-2", "edge-2.example.com")
	none := ca.Issue(t, "")
	foreign := other.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")

	verifying := ca.ServerConfig(t)
	// A server that asks for a certificate but does not verify it: the
	// client's certificate is in PeerCertificates, and proves nothing.
	unverifying := ca.ServerConfig(t)
	unverifying.ClientAuth = tls.RequireAnyClientCert
	unverifying.ClientCAs = nil // else the client sends only a certificate of ca

	for _, tc := range []struct {
		name     string
		server   *tls.Config
		client   *tls.Config
		want     identity.Identity
		verified bool
		names    []string
		str      string
	}{
		{name: "spiffe", server: verifying, client: ca.ClientConfig(&spiffe), verified: true,
			want:  identity.Identity{SPIFFE: "spiffe://example.org/ns/edge/sa/edge-1"},
			names: []string{"spiffe://example.org/ns/edge/sa/edge-1"}, str: "spiffe://example.org/ns/edge/sa/edge-1"},
		{name: "dns", server: verifying, client: ca.ClientConfig(&dns), verified: true,
			want:  identity.Identity{DNS: []string{"edge-1.edge.proxies.example.com", "alt.example.com"}},
			names: []string{"edge-1.edge.proxies.example.com", "alt.example.com"}, str: "DNS edge-1.edge.proxies.example.com, alt.example.com"},
		{name: "spiffe first, then dns", server: verifying, client: ca.ClientConfig(&both), verified: true,
			want:  identity.Identity{SPIFFE: "spiffe://example.org/ns/edge/sa/edge-2", DNS: []string{"edge-2.example.com"}},
			names: []string{"spiffe://example.org/ns/edge/sa/edge-2", "edge-2.example.com"}},
		{name: "verified, no names", server: verifying, client: ca.ClientConfig(&none), verified: true,
			want: identity.Identity{}, names: []string{}, str: "a verified certificate with no SPIFFE ID or DNS name"},
		{name: "no certificate", server: verifying, client: ca.ClientConfig(nil),
			str: "no verified client certificate"},
		{name: "certificate not verified", server: unverifying, client: ca.ClientConfig(&foreign),
			str: "no verified client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := handshake(t, tc.server, tc.client)
			got := identity.FromContext(ctxWith(state))
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(identity.Identity{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
			if got.Verified() != tc.verified {
				t.Errorf("Verified() = %v, want %v", got.Verified(), tc.verified)
			}
			if diff := cmp.Diff(tc.names, got.Names(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Names() (-want +got):\n%s", diff)
			}
			if tc.str != "" && got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
}

// A certificate the server did not verify proves nothing, even when the
// client put it in PeerCertificates; so does a connection without TLS.
func TestFromContextUnverified(t *testing.T) {
	ca := identitytest.NewCA(t, "test CA")
	leaf := ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1")
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf.Cert}}
	if id := identity.FromContext(ctxWith(state)); id.Verified() || id.SPIFFE != "" {
		t.Errorf("unverified peer certificate gave %+v", id)
	}
	if id := identity.FromContext(context.Background()); id.Verified() {
		t.Errorf("no peer gave %+v", id)
	}
	plain := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}})
	if id := identity.FromContext(plain); id.Verified() {
		t.Errorf("plaintext peer gave %+v", id)
	}
}

// Two SPIFFE IDs in one certificate prove neither (an SVID has one).
func TestFromStateTwoSPIFFEIDs(t *testing.T) {
	ca := identitytest.NewCA(t, "test CA")
	a := ca.Issue(t, "spiffe://example.org/a")
	b := ca.Issue(t, "spiffe://example.org/b")
	leaf := *a.Cert
	leaf.URIs = append(append(leaf.URIs[:0:0], a.Cert.URIs...), b.Cert.URIs...)
	id := identity.FromState(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{&leaf}}})
	if id.SPIFFE != "" || !id.Verified() {
		t.Errorf("two SPIFFE IDs gave %+v", id)
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		template, td, err string
	}{
		{template: "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", td: "example.org"},
		{template: "{id}.{cluster}.proxies.example.com"},
		{template: "spiffe://example.org/ns/{cluster}/sa/envoy"},
		{template: "", err: "the template is empty"},
		{template: "  ", err: "the template is empty"},
		{template: "spiffe://{trust_domain}/sa/{id}", err: "no trust domain is configured"},
		{template: "spiffe://{trust_domain}/sa/{id}", td: "Example.org", err: "only lower-case letters"},
		{template: "spiffe://example.org/sa/{node}", err: "unknown placeholder {node}"},
		{template: "spiffe://example.org/sa/{id", err: "unmatched '{'"},
		{template: "spiffe://example.org/sa/id}", err: "unmatched '}'"},
		{template: "spiffe://{trust_domain}/sa/envoy", td: "example.org", err: "names neither {id} nor {cluster}"},
		{template: "spiffe://example.org/{cluster}/{id}"},
		{template: "{id}"},
		{template: "{cluster}.{id}"},
		// Placeholders that do not fill a whole segment or label let two
		// claims make one name: (c, a.b) and (b.c, a) here.
		{template: "spiffe://td/{cluster}.{id}", err: "{cluster} must be a whole path segment"},
		{template: "spiffe://td/ns/{cluster}/sa/{id}.x", err: "{id} must be a whole path segment"},
		{template: "spiffe://td/ns/{cluster}{id}", err: "must be a whole path segment"},
		{template: "{id}{cluster}.x", err: "must be a whole DNS label"},
		{template: "{id}-{cluster}.x", err: "must be a whole DNS label"},
		{template: "x{id}.example.com", err: "{id} must be a whole DNS label"},
		{template: "{id}/{cluster}.example.com", err: "must be a whole DNS label"},
		{template: "{id}.proxies.example.com:443", err: "a DNS name has no ':' or '/'"},
	} {
		_, err := identity.ParseRule(tc.template, tc.td)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseRule(%q, %q): %v", tc.template, tc.td, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseRule(%q, %q) = %v, want an error containing %q", tc.template, tc.td, err, tc.err)
		}
	}
}

func TestRuleCheck(t *testing.T) {
	spiffe, err := identity.ParseRule("spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "example.org")
	if err != nil {
		t.Fatal(err)
	}
	dns, err := identity.ParseRule("{id}.{cluster}.proxies.example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	ca := identitytest.NewCA(t, "test CA")
	verify := func(leaf identitytest.Leaf) identity.Identity {
		return identity.FromState(handshake(t, ca.ServerConfig(t), ca.ClientConfig(&leaf)))
	}
	edge1 := verify(ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-1"))
	edge2 := verify(ca.Issue(t, "spiffe://example.org/ns/edge/sa/edge-2"))
	dnsEdge1 := verify(ca.Issue(t, "", "EDGE-1.edge.proxies.example.com"))
	wildcard := verify(ca.Issue(t, "", "*.edge.proxies.example.com"))

	for _, tc := range []struct {
		name          string
		rule          *identity.Rule
		id            identity.Identity
		node, cluster string
		err           string // "" for a pass; else the exact message
	}{
		{name: "spiffe match", rule: spiffe, id: edge1, node: "edge-1", cluster: "edge"},
		{name: "spiffe other node", rule: spiffe, id: edge2, node: "edge-1", cluster: "edge",
			err: `node "edge-1" in cluster "edge" must present a certificate for spiffe://example.org/ns/edge/sa/edge-1; this one proves spiffe://example.org/ns/edge/sa/edge-2`},
		{name: "spiffe other cluster", rule: spiffe, id: edge1, node: "edge-1", cluster: "core",
			err: `node "edge-1" in cluster "core" must present a certificate for spiffe://example.org/ns/core/sa/edge-1; this one proves spiffe://example.org/ns/edge/sa/edge-1`},
		{name: "spiffe rule, dns certificate", rule: spiffe, id: dnsEdge1, node: "edge-1", cluster: "edge",
			err: `node "edge-1" in cluster "edge" must present a certificate for spiffe://example.org/ns/edge/sa/edge-1; this one proves no SPIFFE ID (DNS EDGE-1.edge.proxies.example.com)`},
		{name: "no certificate", rule: spiffe, node: "edge-1", cluster: "edge",
			err: `node "edge-1" in cluster "edge" must present a certificate for spiffe://example.org/ns/edge/sa/edge-1; the connection has no verified client certificate`},
		{name: "slash in id", rule: spiffe, id: edge1, node: "edge/sa/edge-1", cluster: "edge",
			err: `node id "edge/sa/edge-1" cannot be bound to a certificate by the rule "spiffe://{trust_domain}/ns/{cluster}/sa/{id}": it must be 1 to 128 letters, digits, '.', '-' or '_'`},
		{name: "dot-dot id", rule: spiffe, id: edge1, node: "..", cluster: "edge", err: `node id ".." cannot be bound`},
		{name: "control character", rule: spiffe, id: edge1, node: "edge-1\n", cluster: "edge", err: `node id "edge-1\n" cannot be bound`},
		{name: "empty cluster", rule: spiffe, id: edge1, node: "edge-1", cluster: "", err: `node cluster "" cannot be bound`},
		{name: "dns match, any case", rule: dns, id: dnsEdge1, node: "edge-1", cluster: "edge"},
		{name: "dns label shift", rule: dns, id: dnsEdge1, node: "edge-1.edge", cluster: "proxies",
			err: `node id "edge-1.edge" cannot be bound to a certificate by the rule "{id}.{cluster}.proxies.example.com": it must be 1 to 63 letters, digits, '-' or '_'`},
		{name: "dns upper-case id", rule: dns, id: dnsEdge1, node: "EDGE-1", cluster: "edge",
			err: `node id "EDGE-1" cannot be bound to a certificate by the DNS rule "{id}.{cluster}.proxies.example.com": it must be lower case`},
		{name: "dns upper-case cluster", rule: dns, id: dnsEdge1, node: "edge-1", cluster: "Edge", err: `node cluster "Edge" cannot be bound`},
		{name: "spiffe keeps case", rule: spiffe, id: edge1, node: "EDGE-1", cluster: "edge", err: `this one proves spiffe://example.org/ns/edge/sa/edge-1`},
		{name: "dns mismatch", rule: dns, id: edge1, node: "edge-1", cluster: "edge",
			err: `node "edge-1" in cluster "edge" must present a certificate with DNS name edge-1.edge.proxies.example.com; this one proves spiffe://example.org/ns/edge/sa/edge-1`},
		{name: "wildcard dns proves no node", rule: dns, id: wildcard, node: "edge-1", cluster: "edge",
			err: `this one proves DNS *.edge.proxies.example.com`},
		{name: "huge id is cut in the message", rule: spiffe, id: edge1, node: strings.Repeat("a", 5000), cluster: "edge",
			err: `... (5000 bytes) cannot be bound`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule.Check(tc.id, tc.node, tc.cluster)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.err == "":
			case err == nil:
				t.Fatalf("Check passed, want %q", tc.err)
			case !strings.Contains(err.Error(), tc.err):
				t.Fatalf("Check:\n got %s\nwant %s", err, tc.err)
			}
			if err != nil && len(err.Error()) > 1000 {
				t.Errorf("message of %d bytes: client input must be bounded", len(err.Error()))
			}
		})
	}
}

// A DNS SAN that reads as a URI never stands for one: x509 allows any IA5
// text in a dNSName, and a CA that signs a SPIFFE ID as a DNS name must not
// satisfy a SPIFFE policy (nodegroup.AnyMatch compares every pattern with every
// name).
func TestNamesLeaveOutURILikeDNS(t *testing.T) {
	ca := identitytest.NewCA(t, "test CA")
	leaf := ca.Issue(t, "", "spiffe://example.org/ns/payments/sa/gateway-1", "gw.example.org", "gw.example.org:443")
	id := identity.FromState(handshake(t, ca.ServerConfig(t), ca.ClientConfig(&leaf)))
	if !id.Verified() {
		t.Fatal("certificate not verified")
	}
	if nodegroup.AnyMatch([]string{"spiffe://example.org/ns/payments/sa/*"}, id.Names()) {
		t.Errorf("a DNS SAN spelled like a SPIFFE ID satisfied a SPIFFE policy: names %q", id.Names())
	}
	if diff := cmp.Diff([]string{"gw.example.org"}, id.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}
