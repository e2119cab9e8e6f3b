package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// nodeIdentity is the rule every test here runs Pylon with.
const nodeIdentity = "spiffe://example.org/ns/{cluster}/sa/{id}"

// mtls is a Pylon serving xDS over mutual TLS, with the CA that issued its
// certificate and its clients'.
type mtls struct {
	*pylon
	dir    string
	ca     *certstest.CA
	server certstest.Files
}

// startMTLS runs Pylon on config over mutual TLS (newMTLS, then start).
func startMTLS(t *testing.T, config string, o daemon.Options) *mtls {
	t.Helper()
	m := newMTLS(t)
	m.start(t, config, o)
	return m
}

// newMTLS writes a CA and a server certificate for 127.0.0.1 and localhost.
func newMTLS(t *testing.T) *mtls {
	t.Helper()
	m := &mtls{dir: t.TempDir(), ca: certstest.NewCA(t, "e2e-ca")}
	m.server = m.ca.Issue(t, certstest.Server("pylon-1")).Write(t, m.ca, m.dir, "server")
	return m
}

// start runs Pylon in file mode on config, in m's folder, with the server
// certificate, the client CA and the node identity rule.
func (m *mtls) start(t *testing.T, config string, o daemon.Options) {
	t.Helper()
	cfg := filepath.Join(m.dir, "pylon.yaml")
	writeAtomically(t, cfg, config)
	o.ConfigPath = cfg
	o.XDSTLS = daemon.TLSFiles{Cert: m.server.Cert, Key: m.server.Key, ClientCA: m.server.CA}
	o.NodeIdentity = nodeIdentity
	// Rotations are noticed within 20ms (1s in production), so the
	// rotation test waits briefly.
	o.TLSCheckEvery = 20 * time.Millisecond
	m.pylon, _ = runPylon(t, o)
}

// clientCert issues and writes the certificate of node id in cluster, as
// the rule wants it.
func (m *mtls) clientCert(t *testing.T, id, cluster string) certstest.Files {
	t.Helper()
	uri := "spiffe://example.org/ns/" + cluster + "/sa/" + id
	return m.ca.Issue(t, certstest.Client(uri)).Write(t, m.ca, m.dir, id)
}

// grpcClient is grpc-go's xDS client of xds:///greeter as node id of
// cluster e2e, bootstrapped by `pylon bootstrap --grpc --tls` with the
// given client certificate files.
func (m *mtls) grpcClient(t *testing.T, nodeID string, f certstest.Files) greeter {
	t.Helper()
	var bs, stderr bytes.Buffer
	args := []string{"bootstrap", "--grpc", "--tls", "--ca-file", m.server.CA, "--cert-file", f.Cert, "--key-file", f.Key,
		"--node-id", nodeID, "--node-cluster", "e2e", "--xds-address", m.xdsAddr, "--refresh-interval", "1s"}
	if code := cli.Execute(context.Background(), args, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc --tls: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(bs.String(), `"type": "tls"`) {
		t.Fatalf("bootstrap without TLS channel credentials:\n%s", bs.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	// The data plane (client to backends) is plaintext loopback; only the
	// xDS channel is under test.
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return greeter{testgrpc.NewTestServiceClient(conn)}
}

// xdsConn is a raw gRPC connection to Pylon's xDS port over TLS, with the
// given client certificate or none, for the scripted client.
func (m *mtls) xdsConn(t *testing.T, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: certstest.Pool(m.ca), ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(m.xdsAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serverCert returns the certificate a new TLS handshake with Pylon's xDS
// port presents.
func (m *mtls) serverCert(t *testing.T) *x509.Certificate {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", m.xdsAddr, &tls.Config{RootCAs: certstest.Pool(m.ca), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("TLS handshake with the xDS port: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// The right identity gets its config: grpc-go's xDS client, bootstrapped
// with its certificate, routes an RPC to the backend Pylon names.
func TestMTLSRightIdentityGetsConfig(t *testing.T) {
	ports := startBackends(t, 1)
	m := startMTLS(t, greeterConfig("greeter-backends", ports), daemon.Options{})
	client := m.grpcClient(t, "app-1", m.clientCert(t, "app-1", "e2e"))
	if got := client.call(t); got != "backend-0" {
		t.Fatalf("RPC reached %q, want backend-0", got)
	}
}

// A client whose certificate names another node is refused with
// PermissionDenied: grpc-go's xDS client reports it, and Pylon shows it in
// /proxies and counts it.
func TestMTLSOtherNodesCertificateRefused(t *testing.T) {
	ports := startBackends(t, 1)
	m := startMTLS(t, greeterConfig("greeter-backends", ports), daemon.Options{})
	// app-2 presents app-1's certificate.
	client := m.grpcClient(t, "app-2", m.clientCert(t, "app-1", "e2e"))
	var last error
	if !eventually(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, last = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return last != nil && strings.Contains(last.Error(), "PermissionDenied")
	}) {
		t.Fatalf("RPC error %v, want the xDS client to report PermissionDenied", last)
	}
	t.Logf("the client's error: %v", last)
	refusedVisible(t, m.pylon, "app-2", "identity_mismatch")
}

// refusedVisible waits until Pylon's /proxies shows node's refused stream
// with the reason, and a refusal metric counts the reason.
func refusedVisible(t *testing.T, p *pylon, node, reason string) {
	t.Helper()
	var proxies, metric string
	if !eventually(func() bool {
		code, body := p.tryGet(t, "/proxies/"+node)
		proxies = body
		var st struct {
			Streams []struct {
				Node    string
				Refused *struct{ Reason, Detail string }
			}
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			return false
		}
		for _, s := range st.Streams {
			if s.Node == node && s.Refused != nil && s.Refused.Reason == reason && s.Refused.Detail != "" {
				return true
			}
		}
		return false
	}) {
		t.Errorf("/proxies/%s does not show the refusal (%s):\n%s", node, reason, proxies)
	}
	if !eventually(func() bool {
		for _, l := range strings.Split(p.get(t, "/metrics"), "\n") {
			if strings.Contains(l, "refused") && strings.Contains(l, `reason="`+reason+`"`) && !strings.HasSuffix(l, " 0") {
				metric = l
				return true
			}
		}
		return false
	}) {
		t.Errorf("no refusal metric counts reason %q", reason)
	}
	t.Logf("status: %s; metric: %s", proxies, metric)
}

// A client without a certificate gets no Secret, while one with a verified
// certificate does.
func TestMTLSNoCertificateNoSecret(t *testing.T) {
	m := newMTLS(t)
	certs := filepath.Join(m.dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, filepath.Join(certs, "tls.crt"), "-----BEGIN CERTIFICATE-----\nEDGE\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(certs, "tls.key"), "-----BEGIN PRIVATE KEY-----\nEDGEKEY\n-----END PRIVATE KEY-----\n")
	m.start(t, rotationConfig, daemon.Options{})

	// Anonymous: TLS, no client certificate.
	anon := xdstest.OpenADS(t, m.xdsConn(t, nil), &corev3.Node{Id: "edge-1", Cluster: "edge"})
	anon.Request(xdstype.SecretURL, "edge-cert")
	expectNoSecret(t, anon)

	// The same node with its certificate gets the Secret.
	pair := m.ca.Issue(t, certstest.Client("spiffe://example.org/ns/edge/sa/edge-1")).TLS(t)
	verified := xdstest.OpenADS(t, m.xdsConn(t, &pair), &corev3.Node{Id: "edge-1", Cluster: "edge"})
	verified.Request(xdstype.SecretURL, "edge-cert")
	if r := verified.RecvType(xdstype.SecretURL); len(r.Resources) != 1 {
		t.Fatalf("a verified client got %d Secrets, want 1", len(r.Resources))
	}
}

// expectNoSecret reads the responses up to a probe: any Secret response
// must be empty.
func expectNoSecret(t *testing.T, s *xdstest.Stream) {
	t.Helper()
	s.Request(xdstype.RuntimeURL, xdstest.ProbeName)
	for range 10 {
		r := s.Recv()
		switch r.TypeUrl {
		case xdstype.RuntimeURL:
			return
		case xdstype.SecretURL:
			if len(r.Resources) != 0 {
				t.Fatalf("a client without a certificate got %d Secrets", len(r.Resources))
			}
		}
	}
	t.Fatal("no probe response after 10 responses")
}

// Rotating the server's certificate: a new handshake presents the new
// certificate, and a stream opened before keeps receiving updates, as does
// grpc-go's client.
func TestMTLSServerRotationKeepsStreams(t *testing.T) {
	ports := startBackends(t, 2)
	m := startMTLS(t, greeterConfig("greeter-backends", ports), daemon.Options{})
	client := m.grpcClient(t, "app-1", m.clientCert(t, "app-1", "e2e"))
	client.call(t)
	pair := m.ca.Issue(t, certstest.Client("spiffe://example.org/ns/e2e/sa/edge-1")).TLS(t)
	s := xdstest.OpenADS(t, m.xdsConn(t, &pair), &corev3.Node{Id: "edge-1", Cluster: "e2e"})
	s.Request(xdstype.EndpointURL, "greeter-backends")
	if r := s.RecvType(xdstype.EndpointURL); endpointCount(t, r) != 2 {
		t.Fatalf("first assignment: %d endpoints, want 2", endpointCount(t, r))
	}
	s.Request(xdstype.EndpointURL, "greeter-backends")

	if cn := m.serverCert(t).Subject.CommonName; cn != "pylon-1" {
		t.Fatalf("serving %q before the rotation", cn)
	}
	m.ca.Issue(t, certstest.Server("pylon-2")).Write(t, m.ca, m.dir, "server")
	if !eventually(func() bool { return m.serverCert(t).Subject.CommonName == "pylon-2" }) {
		t.Fatal("a new handshake still presents the old certificate")
	}

	// The config changes: both streams opened before the rotation follow.
	writeAtomically(t, filepath.Join(m.dir, "pylon.yaml"), greeterConfig("greeter-backends", ports[:1]))
	if r := s.RecvType(xdstype.EndpointURL); endpointCount(t, r) != 1 {
		t.Fatalf("after the rotation: %d endpoints, want 1", endpointCount(t, r))
	}
	if !eventually(func() bool { return onlyTo(func() string { return client.call(t) }, "backend-0", 10) }) {
		t.Fatal("grpc-go's client stopped following the config after the rotation")
	}
}

func endpointCount(t *testing.T, r *discoveryv3.DiscoveryResponse) int {
	t.Helper()
	n := 0
	for _, res := range r.Resources {
		var cla endpointv3.ClusterLoadAssignment
		if err := res.UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		for _, l := range cla.GetEndpoints() {
			n += len(l.GetLbEndpoints())
		}
	}
	return n
}

// The admin API over TLS: the CLI reaches it with --admin-ca-file and the
// read token; a plaintext request is refused, and so is a client
// certificate from another CA; open probes need no token.
func TestAdminOverTLS(t *testing.T) {
	m := newMTLS(t)
	cfg := filepath.Join(m.dir, "pylon.yaml")
	writeAtomically(t, cfg, "resources: []\n")
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, AdminTLS: daemon.TLSFiles{Cert: m.server.Cert, Key: m.server.Key, ClientCA: m.server.CA}})

	op := m.clientCert(t, "operator", "ops")
	out := p.cli(t, "status", "--admin-ca-file", m.server.CA, "--admin-cert-file", op.Cert, "--admin-key-file", op.Key)
	if !strings.Contains(out, "NAME") {
		t.Fatalf("pylon status over TLS:\n%s", out)
	}
	opCert, err := tls.LoadX509KeyPair(op.Cert, op.Key)
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(cert *tls.Certificate) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: certstest.Pool(m.ca), ServerName: "localhost",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil },
		}}}
	}
	client := withCert(&opCert)
	resp, err := client.Get("https://" + p.adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("readyz over TLS: %d %v", resp.StatusCode, resp.TLS)
	}
	// Plaintext HTTP to the TLS port gets no API.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.adminAddr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the admin API answered plaintext HTTP on its TLS port")
		}
	}
	// --admin-client-ca is an access control: a client certificate from
	// that CA is required, one from another CA or none is refused.
	foreign := certstest.NewCA(t, "foreign").Issue(t, certstest.Client("spiffe://example.org/ns/x/sa/y")).TLS(t)
	for name, c := range map[string]*http.Client{"another CA's certificate": withCert(&foreign), "no certificate": withCert(&tls.Certificate{})} {
		if resp, err := c.Get("https://" + p.adminAddr + "/readyz"); err == nil {
			resp.Body.Close()
			t.Fatalf("the admin API accepted a client with %s", name)
		}
	}
	// Reads need a token even over TLS.
	resp, err = client.Get("https://" + p.adminAddr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /status without a token: %d, want 401", resp.StatusCode)
	}
}

// With --xds-require-client-cert a client without a certificate cannot
// open a stream at all; with one it can.
func TestMTLSRequireClientCert(t *testing.T) {
	m := newMTLS(t)
	m.start(t, greeterConfig("greeter-backends", []int{1}), daemon.Options{XDSRequireClientCert: true})
	open := func(conn *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, xdstest.ADSMethod)
		if err != nil {
			return err
		}
		node := &corev3.Node{Id: "edge-1", Cluster: "e2e"}
		if err := s.SendMsg(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: xdstype.ClusterURL}); err != nil {
			return err
		}
		return s.RecvMsg(&discoveryv3.DiscoveryResponse{})
	}
	if err := open(m.xdsConn(t, nil)); err == nil {
		t.Fatal("a client without a certificate got a response")
	}
	pair := m.ca.Issue(t, certstest.Client("spiffe://example.org/ns/e2e/sa/edge-1")).TLS(t)
	if err := open(m.xdsConn(t, &pair)); err != nil {
		t.Fatalf("a client with its certificate: %v", err)
	}
}
