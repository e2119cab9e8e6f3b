package interop

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// startMTLSBackend is a TLS backend that requires a client certificate
// ca signed and answers any unary method with the URI SAN of the client's
// certificate; it returns the port.
func startMTLSBackend(t *testing.T, ca *certstest.CA) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leaf := ca.Issue(t, certstest.Leaf{CommonName: "greeter", DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLS(t)}, ClientCAs: certstest.Pool(ca), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	s := grpc.NewServer(grpc.Creds(creds), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		who := "no certificate"
		if p, ok := peer.FromContext(stream.Context()); ok {
			if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 && len(info.State.PeerCertificates[0].URIs) > 0 {
				who = info.State.PeerCertificates[0].URIs[0].String()
			}
		}
		return stream.SendMsg(wrapperspb.String(who))
	}))
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().(*net.TCPAddr).Port
}

// TestClientsMTLSFromCertificateProviders (gRFC A29) with each client: a
// service's tls: { provider: default } makes its clients, bootstrapped
// with `pylon bootstrap --grpc --cert-dir`, call it over TLS with the
// provider's certificate, which the backend requires and reads back.
func TestClientsMTLSFromCertificateProviders(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ca := certstest.NewCA(t, "interop-ca")
			port := startMTLSBackend(t, ca)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  tls: { provider: default }
  endpoints: [{ address: 127.0.0.1, port: %d }]
groups:
- name: interop
  match: { metadata: { client: %q }, region: interop, zone: zone-a }
  clients: [%s]
grpc:
- target: greeter
  to: [{ service: greeter }]
`, port, c.name, c.name))
			id := "spiffe://example.org/ns/interop/sa/" + c.name
			dir := t.TempDir()
			leaf := ca.Issue(t, certstest.Client(id))
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirCert), leaf.CertPEM)
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirKey), leaf.KeyPEM)
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirCA), ca.PEM)
			o := node(c.name)
			o.XDSAddress, o.CertDir = startPylon(t, cfg), dir
			content, err := bootstrap.GRPC(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "xds-bootstrap.json")
			certstest.WriteFile(t, path, content)
			var cl client
			switch c.name {
			case "grpc-go":
				cl = startGoXDSCredsClient(t, content)
			case "grpc-core":
				cl = startSubprocessEnv(t, path, []string{"PYLON_INTEROP_XDS_CREDS=1"}, python(t), "client.py", "xds:///greeter")
			default:
				cl = startSubprocessEnv(t, path, []string{"PYLON_INTEROP_XDS_CREDS=1"}, nodeJS(t), "client.js", "xds:///greeter")
			}
			got, err := cl.call(method, nil)
			if err != nil {
				t.Fatalf("RPC over mTLS: %v", err)
			}
			if got != id {
				t.Fatalf("the backend saw %q, want the client certificate %s", got, id)
			}
		})
	}
}

// startGoXDSCredsClient is startGoClient with xDS credentials.
func startGoXDSCredsClient(t *testing.T, bootstrapJSON []byte) *goClient {
	t.Helper()
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &goClient{conn: conn}
}
