package xds_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/identity/identitytest"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const edgeSA = "spiffe://example.org/ns/edge/sa/"

// secret is a Secret holding a trusted CA (content does not matter here).
func secret(name string) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}},
	}}}
}

// mtls is an xDS server on loopback TLS that verifies client certificates
// of its CA when given, binding node ids by the rule
// spiffe://example.org/ns/{cluster}/sa/{id}, and serving two groups:
// "secure", for edge-* nodes whose certificate is an edge SPIFFE ID, with
// the Secrets edge-1-key (policy: edge-1 only) and edge-ca; and the
// default group, with the Secret edge-ca.
type mtls struct {
	ca  *identitytest.CA
	srv *xdstest.Server
	rec *recorder
}

func startMTLS(t *testing.T, opts xds.Options) *mtls {
	t.Helper()
	rule, err := identity.ParseRule("spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "example.org")
	if err != nil {
		t.Fatal(err)
	}
	ca := identitytest.NewCA(t, "pylon test CA")
	rec := newRecorder()
	opts.Identity, opts.Observer = rule, rec
	srv := xdstest.StartTLS(t, opts, ca.ServerConfig(t))
	rules := nodegroup.Groups{
		{Name: "secure", Match: nodegroup.Match{ID: "edge-*"}, Identities: []string{edgeSA + "*"}},
		{Name: "default", Default: true},
	}
	secure := xdstest.Snapshot(t, srv.Registry, xdstest.Cluster("secure-web"), xdstest.Endpoints("secure-web", 1), secret("edge-1-key"), secret("edge-ca"))
	public := xdstest.Snapshot(t, srv.Registry, xdstest.Cluster("public-web"), xdstest.Endpoints("public-web", 2), secret("edge-ca"))
	f := fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{secure, public})
	f.RestrictSecrets(map[string][]string{"edge-1-key": {edgeSA + "edge-1"}})
	srv.Publisher.Publish(f)
	return &mtls{ca: ca, srv: srv, rec: rec}
}

// dial connects presenting a certificate for spiffe ("": none).
func (m *mtls) dial(t *testing.T, spiffe string) *grpc.ClientConn {
	t.Helper()
	if spiffe == "" {
		return xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(nil))
	}
	leaf := m.ca.Issue(t, spiffe)
	return xdstest.DialTLS(t, m.srv.Addr, m.ca.ClientConfig(&leaf))
}

func edgeNode(id string) *corev3.Node {
	n := xdstest.Node(id)
	n.Cluster = "edge"
	return n
}

// The node its certificate proves gets its group's config, every Secret
// the policy allows it included.
func TestIdentityMatchingCertificateGetsConfig(t *testing.T) {
	m := startMTLS(t, xds.Options{})
	s := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-1"), edgeNode("edge-1"))
	s.Request(cds)
	wantNames(t, s.RecvType(cds), "secure-web")
	s.Request(sds, "edge-1-key", "edge-ca")
	wantNames(t, s.RecvType(sds), "edge-1-key", "edge-ca")
	opened := m.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamOpened })
	if opened.Identity != edgeSA+"edge-1" || opened.Group != "secure" {
		t.Fatalf("opened with identity %q in group %q", opened.Identity, opened.Group)
	}
}

// A certificate for another node is refused with PERMISSION_DENIED and
// the reason, reported as refused (never opened).
func TestIdentityOtherNodesCertificateRefused(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			m := startMTLS(t, xds.Options{})
			conn := m.dial(t, edgeSA+"edge-2")
			var err error
			if delta {
				s := xdstest.OpenDeltaADS(t, conn, edgeNode("edge-1"))
				s.Subscribe(cds)
				err = s.Err()
			} else {
				s := xdstest.OpenADS(t, conn, edgeNode("edge-1"))
				s.Request(cds)
				err = s.Err()
			}
			const want = `node "edge-1" in cluster "edge" must present a certificate for spiffe://example.org/ns/edge/sa/edge-1; this one proves spiffe://example.org/ns/edge/sa/edge-2`
			if grpcstatus.Code(err) != codes.PermissionDenied || grpcstatus.Convert(err).Message() != want {
				t.Fatalf("stream ended with %v\nwant PermissionDenied: %s", err, want)
			}
			ev := m.rec.wait(t, func(e status.Event) bool { return e.Kind == status.StreamRefused })
			if ev.Reason != xds.RefusedIdentity || ev.Detail != want || ev.NodeID() != "edge-1" || ev.Identity != edgeSA+"edge-2" {
				t.Fatalf("refusal reported as %+v", ev)
			}
			if n := m.rec.count(func(e status.Event) bool { return e.Kind == status.StreamOpened }); n != 0 {
				t.Fatalf("a refused stream was reported opened")
			}
		})
	}
}

// A client without a certificate gets everything but the Secrets, and
// cannot join a group that declares identities by claiming a node id of
// that group.
func TestIdentityNoCertificateGetsNoSecrets(t *testing.T) {
	m := startMTLS(t, xds.Options{})
	conn := m.dial(t, "")
	s := xdstest.OpenADS(t, conn, edgeNode("edge-1"))
	s.Request(cds)
	wantNames(t, s.RecvType(cds), "public-web") // the default group's, not secure's
	s.Request(eds, "public-web")
	wantNames(t, s.RecvType(eds), "public-web")
	s.Request(sds, "edge-ca")
	s.ExpectSilence() // edge-ca exists in its group, but not for this stream
	// Status is told what the stream should hold of Secrets: not its
	// group's version, which it will never have.
	ev := m.rec.wait(t, func(e status.Event) bool {
		return e.Kind == status.ExpectedVersion && e.NodeID() == "edge-1" && e.TypeURL == sds
	})
	if ev.Version == "" {
		t.Fatalf("expected version reported as %q of %s", ev.Version, ev.TypeURL)
	}

	d := xdstest.OpenDeltaADS(t, conn, edgeNode("edge-3"))
	d.Subscribe(sds, "edge-ca")
	r := d.RecvType(sds)
	if len(r.Resources) != 0 || strings.Join(r.RemovedResources, ",") != "edge-ca" {
		t.Fatalf("delta SDS response: %d resources, removed %v; want none, and edge-ca not found", len(r.Resources), r.RemovedResources)
	}
}

// A Secret restricted by policy reaches only the identity it names; the
// same stream gets the Secrets open to its group.
func TestIdentitySecretPolicy(t *testing.T) {
	m := startMTLS(t, xds.Options{})
	other := xdstest.OpenADS(t, m.dial(t, edgeSA+"edge-2"), edgeNode("edge-2"))
	other.Request(cds)
	wantNames(t, other.RecvType(cds), "secure-web")
	other.Request(sds, "edge-1-key", "edge-ca")
	wantNames(t, other.RecvType(sds), "edge-ca")

	d := xdstest.OpenDeltaADS(t, m.dial(t, edgeSA+"edge-2"), edgeNode("edge-2"))
	d.Subscribe(sds, "edge-1-key", "edge-ca")
	r := d.RecvType(sds)
	if len(r.Resources) != 1 || r.Resources[0].Name != "edge-ca" || strings.Join(r.RemovedResources, ",") != "edge-1-key" {
		t.Fatalf("delta SDS response: %d resources, removed %v; want edge-ca, and edge-1-key not found", len(r.Resources), r.RemovedResources)
	}
}

// InsecureServeSecrets serves Secrets without a client certificate, but
// the secret policy still holds back those restricted to identities.
func TestIdentityInsecureServeSecrets(t *testing.T) {
	m := startMTLS(t, xds.Options{InsecureServeSecrets: true})
	s := xdstest.OpenADS(t, m.dial(t, ""), xdstest.Node("anyone"))
	s.Request(sds, "edge-1-key", "edge-ca")
	wantNames(t, s.RecvType(sds), "edge-ca")
}

// Two certificates that differ only past the fourth DNS name (where
// Identity.String stops listing them) are two identities: per-type streams
// claiming the same node id under the other certificate do not share the
// first one's make-before-break state, so its ACKs cannot release the
// first client's route before that client has the cluster.
func TestBoardKeyedOnEveryCertificateName(t *testing.T) {
	ca := identitytest.NewCA(t, "pylon test CA")
	rec := newRecorder()
	srv := xdstest.StartTLS(t, xds.Options{Observer: rec, HoldTimeout: time.Minute}, ca.ServerConfig(t))
	e := &env{srv: srv, rec: rec}
	world := func(v int) []any { return append(payments(v), routeTable("other", "/", "web")) }
	srv.Publish(t, world(1)...)
	dial := func(last string) *grpc.ClientConn {
		leaf := ca.Issue(t, "", "a.example", "b.example", "c.example", "d.example", last)
		return xdstest.DialTLS(t, srv.Addr, ca.ClientConfig(&leaf))
	}
	// sotwType opens a per-type stream for names and ACKs its first
	// response (a repeated request carries its nonce), returning it.
	sotwType := func(conn *grpc.ClientConn, url string, names ...string) *xdstest.Stream {
		s := xdstest.OpenType(t, conn, srv.Registry.Lookup(url), xdstest.Node("split"))
		s.Request(url, names...)
		s.RecvType(url)
		s.Request(url, names...)
		return s
	}
	mine := dial("e1.example")
	c := sotwType(mine, cds)
	sotwType(mine, eds, "payments-v1", "web")
	rt := sotwType(mine, rds, "routes")
	e.waitACKs(t, "split", cds, eds, rds)

	// The other certificate's client claims the same node id and ACKs
	// the new clusters and their endpoints at once.
	theirs := dial("e2.example")
	oc := sotwType(theirs, cds)
	oe := sotwType(theirs, eds, "payments-v1", "web")
	srv.Publish(t, world(2)...)
	c.RecvType(cds) // not ACKed: "routes" must wait for it
	acked := func(url string, r *discoveryv3.DiscoveryResponse) {
		rec.wait(t, func(ev status.Event) bool {
			return ev.Kind == status.RequestACK && ev.TypeURL == url && ev.Version == r.VersionInfo
		})
	}
	cr := oc.RecvType(cds)
	oc.Request(cds)
	acked(cds, cr)
	oe.Request(eds, "payments-v1", "payments-v2", "web")
	er := oe.RecvType(eds)
	oe.Request(eds, "payments-v1", "payments-v2", "web")
	acked(eds, er)

	// The answer to one more route shows where "routes" stands.
	rt.Request(rds, "routes", "other")
	for _, a := range rt.RecvType(rds).Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if xdstype.NameOf(m) == "routes" && !slices.Contains(xdstest.Refs(m), "payments-v1") {
			t.Fatalf("route shifted to %v on another certificate's ACKs", xdstest.Refs(m))
		}
	}
}
