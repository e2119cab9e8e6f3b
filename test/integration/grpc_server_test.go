package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/cli"
)

// xdsServer is an xDS-enabled grpc-go server (gRFC A36) serving the test
// service on a loopback port, bootstrapped by `pylon bootstrap --grpc
// --server` with extra flags (--cert-dir).
type xdsServer struct {
	port    int
	serving chan struct{} // closed when the server first serves
}

// listenLoopback takes a loopback port for a server whose config must
// name it before it starts.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// startXDSServer serves lis with grpc-go's xDS server against Pylon at
// xdsAddr, with xDS credentials (plaintext where its Listener sets no TLS).
func startXDSServer(t *testing.T, lis net.Listener, xdsAddr, nodeID string, flags ...string) *xdsServer {
	t.Helper()
	args := append([]string{"bootstrap", "--grpc", "--server", "--node-id", nodeID, "--xds-address", xdsAddr}, flags...)
	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), args, &bs, &stderr); code != 0 {
		t.Fatalf("pylon %v: exit %d: %s", args, code, stderr.String())
	}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	s := &xdsServer{port: lis.Addr().(*net.TCPAddr).Port, serving: make(chan struct{})}
	var once sync.Once
	mode := xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
		t.Logf("xDS server %s: %v %v", nodeID, args.Mode, args.Err)
		if args.Mode == connectivity.ServingModeServing {
			once.Do(func() { close(s.serving) })
		}
	})
	server, err := xds.NewGRPCServer(grpc.Creds(creds), mode, xds.BootstrapContentsForTesting(bs.Bytes()))
	if err != nil {
		t.Fatalf("grpc-go refused the server bootstrap: %v", err)
	}
	testgrpc.RegisterTestServiceServer(server, &backend{id: nodeID})
	done := make(chan struct{})
	go func() { defer close(done); _ = server.Serve(lis) }()
	t.Cleanup(func() { server.Stop(); <-done })
	return s
}

// waitServing waits until the server serves, which it does only once it
// has a Listener for its address.
func (s *xdsServer) waitServing(t *testing.T) {
	t.Helper()
	select {
	case <-s.serving:
	case <-time.After(bound):
		t.Fatalf("the xDS server on port %d never served: it got no Listener it accepts", s.port)
	}
}

// directCall makes one RPC straight to port with creds and metadata md.
func directCall(t *testing.T, port int, creds credentials.TransportCredentials, md ...string) error {
	t.Helper()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	return err
}

// TestGRPCServerFromModelServes (gRFC A36): a target's `server` becomes the
// Listener an xDS-enabled grpc-go server fetches for its address, and the
// server serves RPCs (it serves none until it has one).
func TestGRPCServerFromModelServes(t *testing.T) {
	lis := listenLoopback(t)
	port := lis.Addr().(*net.TCPAddr).Port
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %[1]d }]
grpc:
- target: greeter
  to: [{ service: greeter }]
  server: { listen: "127.0.0.1:%[1]d" }
`, port))
	p := startPylon(t, cfg)
	s := startXDSServer(t, lis, p.xdsAddr, "server-1")
	s.waitServing(t)
	if err := directCall(t, port, insecure.NewCredentials()); err != nil {
		t.Fatalf("an RPC to the serving xDS server: %v", err)
	}
	// And through xds:///greeter, the way its clients reach it.
	if got := p.grpcClient(t, "server-client").call(t); got != "server-1" {
		t.Fatalf("xds:///greeter answered by %q, want server-1", got)
	}
}

// TestGRPCServerRBACRefusesByMethodAndHeader (gRFC A41): a target's
// server-side rbac refuses with PERMISSION_DENIED what its deny policy
// matches (a header) and what no allow policy matches (another method),
// and admits the rest.
func TestGRPCServerRBACRefusesByMethodAndHeader(t *testing.T) {
	lis := listenLoopback(t)
	port := lis.Addr().(*net.TCPAddr).Port
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %[1]d }]
grpc:
- target: greeter
  to: [{ service: greeter }]
  server:
    listen: "127.0.0.1:%[1]d"
    rbac:
      deny:
      - name: blocked
        headers: [{ name: x-blocked, present: true }]
      allow:
      - name: unary
        methods: [/grpc.testing.TestService/UnaryCall]
`, port))
	p := startPylon(t, cfg)
	s := startXDSServer(t, lis, p.xdsAddr, "rbac-server")
	s.waitServing(t)
	if err := directCall(t, port, insecure.NewCredentials()); err != nil {
		t.Fatalf("an allowed RPC: %v", err)
	}
	err := directCall(t, port, insecure.NewCredentials(), "x-blocked", "yes")
	if grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("an RPC the deny policy matches: %v, want PERMISSION_DENIED", err)
	}
	t.Logf("denied: %v", err)

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = testgrpc.NewTestServiceClient(conn).EmptyCall(ctx, &testgrpc.Empty{})
	if grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("a method no allow policy names: %v, want PERMISSION_DENIED", err)
	}
	t.Logf("not allowed: %v", err)
}

// TestGRPCServerMTLSAndRBACByPrincipal (gRFC A29, A41): the server's TLS
// and the clients' come from certificate providers their bootstraps name
// (pylon bootstrap --grpc --cert-dir); the principal RBAC reads is the
// client certificate's URI SAN. A client of xds:///greeter with the
// allowed identity is served, one with another identity is refused with
// PERMISSION_DENIED, and one without a certificate at the handshake.
func TestGRPCServerMTLSAndRBACByPrincipal(t *testing.T) {
	ca := certstest.NewCA(t, "apps-ca")
	certDir := func(l certstest.Leaf) string {
		dir := t.TempDir()
		pair := ca.Issue(t, l)
		certstest.WriteFile(t, filepath.Join(dir, "tls.crt"), pair.CertPEM)
		certstest.WriteFile(t, filepath.Join(dir, "tls.key"), pair.KeyPEM)
		certstest.WriteFile(t, filepath.Join(dir, "ca.crt"), ca.PEM)
		return dir
	}
	const allowed = "spiffe://example.org/ns/apps/sa/caller"
	serverDir := certDir(certstest.Leaf{CommonName: "greeter", DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []string{"spiffe://example.org/ns/apps/sa/greeter"}, Both: true})
	allowedDir := certDir(certstest.Client(allowed))
	otherDir := certDir(certstest.Client("spiffe://example.org/ns/apps/sa/intruder"))

	lis := listenLoopback(t)
	port := lis.Addr().(*net.TCPAddr).Port
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  tls: { provider: default }
  endpoints: [{ address: 127.0.0.1, port: %[1]d }]
grpc:
- target: greeter
  to: [{ service: greeter }]
  server:
    listen: "127.0.0.1:%[1]d"
    tls: {}
    rbac:
      allow:
      - name: callers
        principals: [%[2]q]
`, port, allowed))
	p := startPylon(t, cfg)
	s := startXDSServer(t, lis, p.xdsAddr, "mtls-server", "--cert-dir", serverDir)
	s.waitServing(t)

	client := func(nodeID, dir string) testgrpc.TestServiceClient {
		var bs, stderr bytes.Buffer
		args := []string{"bootstrap", "--grpc", "--node-id", nodeID, "--xds-address", p.xdsAddr, "--cert-dir", dir}
		if code := cli.Execute(context.Background(), args, &bs, &stderr); code != 0 {
			t.Fatalf("pylon %v: exit %d: %s", args, code, stderr.String())
		}
		resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
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
		return testgrpc.NewTestServiceClient(conn)
	}
	call := func(c testgrpc.TestServiceClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		return err
	}
	if err := call(client("allowed-client", allowedDir)); err != nil {
		t.Fatalf("the allowed identity over mTLS: %v", err)
	}
	err := call(client("other-client", otherDir))
	if grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("another identity over mTLS: %v, want PERMISSION_DENIED", err)
	}
	t.Logf("other identity: %v", err)

	// Without a certificate: TLS that trusts the server, presenting none.
	noCert := credentials.NewTLS(&tls.Config{RootCAs: certstest.Pool(ca), ServerName: "localhost", MinVersion: tls.VersionTLS12})
	err = directCall(t, port, noCert)
	if code := grpcstatus.Code(err); code != codes.Unavailable {
		t.Fatalf("a client without a certificate: %v, want the handshake refused (UNAVAILABLE)", err)
	}
	t.Logf("no certificate: %v", err)
	// And plaintext is not served at all.
	if err := directCall(t, port, insecure.NewCredentials()); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("a plaintext client: %v, want UNAVAILABLE", err)
	}
}
