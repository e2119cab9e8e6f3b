package xdsrest_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdsrest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const edgeSA = "spiffe://example.org/ns/edge/sa/"

// marker is in every Secret's payload: a reply that must not carry key
// material must not carry it.
const marker = "MIIB-PYLON-TEST-KEY"

func secret(name string) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "-----BEGIN CERTIFICATE-----\n" + marker + "\n-----END CERTIFICATE-----\n"}},
	}}}
}

func edgeNode(id string) *corev3.Node {
	n := xdstest.Node(id)
	n.Cluster = "edge"
	return n
}

// startMTLS serves REST over TLS verifying client certificates of ca,
// binding node ids by spiffe://example.org/ns/{cluster}/sa/{id}, with the
// groups of the xds package's identity tests: "secure" (edge-* nodes
// whose certificate is an edge SPIFFE ID) with the Secrets edge-1-key
// (policy: edge-1 only) and edge-ca; the default group with edge-ca.
func startMTLS(t *testing.T) (*rest, *identitytest.CA) {
	t.Helper()
	rule, err := identity.ParseRule("spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "example.org")
	if err != nil {
		t.Fatal(err)
	}
	ca := identitytest.NewCA(t, "pylon test CA")
	r := start(t, xds.Options{Identity: rule}, xdsrest.Options{}, ca.ServerConfig(t))
	rules := nodegroup.Groups{
		{Name: "secure", Match: nodegroup.Match{ID: "edge-*"}, Identities: []string{edgeSA + "*"}},
		{Name: "default", Default: true},
	}
	secure := xdstest.Snapshot(t, r.xds.Registry, cluster("secure-web"), secret("edge-1-key"), secret("edge-ca"))
	public := xdstest.Snapshot(t, r.xds.Registry, cluster("public-web"), secret("edge-ca"))
	f := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{secure, public})
	f.RestrictSecrets(map[string][]string{"edge-1-key": {edgeSA + "edge-1"}})
	r.xds.Publisher.Publish(f)
	return r, ca
}

// client is an HTTPS client trusting ca, presenting a certificate for
// spiffe ("": none).
func client(t *testing.T, ca *identitytest.CA, spiffe string) *http.Client {
	var leaf *identitytest.Leaf
	if spiffe != "" {
		l := ca.Issue(t, spiffe)
		leaf = &l
	}
	tr := &http.Transport{TLSClientConfig: ca.ClientConfig(leaf)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Secrets over REST follow the gRPC rules: a verified certificate proving
// the node gets what its group and the secret policy allow; no
// certificate gets no Secret; a certificate for another node is refused.
func TestX44_Secrets(t *testing.T) {
	r, ca := startMTLS(t)
	names := []string{"edge-1-key", "edge-ca"}

	rep := r.poller(t, sdsPath, edgeNode("edge-1"), xdstype.SecretURL, names...).withClient(client(t, ca, edgeSA+"edge-1")).poll().want(t, http.StatusOK)
	if got := rep.names(t); !slices.Equal(got, names) {
		t.Fatalf("edge-1 with its certificate got %v, want %v", got, names)
	}

	// Only what the policy allows another verified node.
	rep = r.poller(t, sdsPath, edgeNode("edge-2"), xdstype.SecretURL, names...).withClient(client(t, ca, edgeSA+"edge-2")).poll().want(t, http.StatusOK)
	if got := rep.names(t); !slices.Equal(got, []string{"edge-ca"}) {
		t.Fatalf("edge-2 got %v, want [edge-ca]", got)
	}

	// No certificate: no Secret, so nothing to answer (the core sends
	// nothing, as on gRPC), and no key material in the reply.
	rep = r.poller(t, sdsPath, edgeNode("edge-1"), xdstype.SecretURL, names...).withClient(client(t, ca, "")).poll().want(t, http.StatusNotModified)
	if strings.Contains(string(rep.body), marker) {
		t.Fatalf("an unverified client got key material: %s", rep.body)
	}
	// ...though it gets the rest of its group's config (the default group:
	// the secure one declares identities).
	rep = r.poller(t, cdsPath, edgeNode("edge-1"), "").withClient(client(t, ca, "")).poll().want(t, http.StatusOK)
	if got := rep.names(t); !slices.Equal(got, []string{"public-web"}) {
		t.Fatalf("unverified edge-1 got clusters %v, want [public-web]", got)
	}

	// A certificate for another node: 403 with the core's reason.
	rep = r.poller(t, sdsPath, edgeNode("edge-1"), xdstype.SecretURL, names...).withClient(client(t, ca, edgeSA+"edge-2")).poll().want(t, http.StatusForbidden)
	const want = `node "edge-1" in cluster "edge" must present a certificate for spiffe://example.org/ns/edge/sa/edge-1; this one proves spiffe://example.org/ns/edge/sa/edge-2`
	if got := strings.TrimSpace(string(rep.body)); got != want || strings.Contains(got, marker) {
		t.Fatalf("403 body %q\nwant %q", got, want)
	}
}
