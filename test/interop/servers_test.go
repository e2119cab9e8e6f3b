package interop

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// featureServers are the xDS-enabled servers (gRFC A36) the server tests
// run, by the name a group's `clients:` gives them: grpc-go's are
// test/integration's.
var featureServers = []struct {
	name  string
	start func(t *testing.T, bootstrapPath, name, address string)
}{
	{"grpc-core", func(t *testing.T, path, name, address string) {
		startSubprocess(t, path, python(t), "server.py", name, address)
	}},
	{"grpc-js", func(t *testing.T, path, name, address string) {
		startSubprocess(t, path, nodeJS(t), "server.js", name, address)
	}},
}

// freePort is a loopback port nothing listens on now, for a server started
// in a subprocess whose config must name it first.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// writeServerBootstrap writes the bootstrap `pylon bootstrap --grpc
// --server` prints for the server's node.
func writeServerBootstrap(t *testing.T, client, xdsAddr string) string {
	t.Helper()
	o := node(client)
	o.XDSAddress, o.Server = xdsAddr, true
	content, err := bootstrap.GRPC(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "xds-bootstrap.json")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverConfig is xds:///greeter served by one xDS-enabled server on
// address, for a group of that server's implementation (checked against
// what it accepts unless unchecked), with the server block's extra lines.
func serverConfig(client string, port int, address, extra string, unchecked bool) string {
	clients := fmt.Sprintf("\n  clients: [%s]", client)
	if unchecked {
		clients = ""
	}
	return fmt.Sprintf(`services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %d }]
groups:
- name: interop
  match: { metadata: { client: %q }, region: interop, zone: zone-a }%s
grpc:
- target: greeter
  to: [{ service: greeter }]
  server:
    listen: %q
%s`, port, client, clients, address, extra)
}

// serverConn is a plaintext grpc-go connection to address; call makes a
// unary RPC of method that waits for the server (at most 2 s) and returns
// its answer.
type serverConn struct{ conn *grpc.ClientConn }

func dialServer(t *testing.T, address string) serverConn {
	t.Helper()
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return serverConn{conn}
}

func (c serverConn) call(method string, md ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	var out wrapperspb.StringValue
	err := c.conn.Invoke(ctx, method, &emptypb.Empty{}, &out, grpc.WaitForReady(true))
	return out.GetValue(), err
}

// waitServed retries an RPC of method until the server answers as want,
// within bound: a server serves once it has its Listener.
func (c serverConn) waitServed(t *testing.T, want string) {
	t.Helper()
	got, err := c.call(method)
	for deadline := time.Now().Add(bound); (err != nil || got != want) && time.Now().Before(deadline); got, err = c.call(method) {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || got != want {
		t.Fatalf("an RPC to the xDS server: %q, %v; want %q", got, err, want)
	}
}

// TestServersServeTheModelsListener (gRFC A36) with C-core's and grpc-js's
// xDS-enabled servers, bootstrapped as `pylon bootstrap --grpc --server`
// prints it: they serve once Pylon sends the Listener of a target's
// server block, checked for their group.
func TestServersServeTheModelsListener(t *testing.T) {
	for _, s := range featureServers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			address := fmt.Sprintf("127.0.0.1:%d", port)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, serverConfig(s.name, port, address, "", false))
			s.start(t, writeServerBootstrap(t, s.name, startPylon(t, cfg)), s.name+"-server", address)
			dialServer(t, address).waitServed(t, s.name+"-server")
		})
	}
}

const rbacBlock = `    rbac:
      deny: [{ name: blocked, headers: [{ name: x-blocked, present: true }] }]
      allow: [{ name: greeter, methods: ["/pylon.interop.Greeter/*"] }]
`

// TestServersRBACRefusesAnUnauthorizedCaller (gRFC A41) with C-core's
// server: its RBAC refuses with PERMISSION_DENIED an RPC the deny policy
// matches (a header) and one no allow policy matches (another service),
// and admits the rest. grpc-js 1.14 implements RBAC only behind
// GRPC_XDS_EXPERIMENTAL_RBAC=true and NACKs it by default: Pylon refuses
// it for a group of grpc-js, and a grpc-js server served it anyway never
// serves.
func TestServersRBACRefusesAnUnauthorizedCaller(t *testing.T) {
	for _, s := range featureServers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			address := fmt.Sprintf("127.0.0.1:%d", port)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			if s.name == "grpc-js" {
				rbacRefusedByGRPCJS(t, s.start, serverConfig(s.name, port, address, rbacBlock, false), serverConfig(s.name, port, address, rbacBlock, true), cfg, address)
				return
			}
			writeAtomically(t, cfg, serverConfig(s.name, port, address, rbacBlock, false))
			s.start(t, writeServerBootstrap(t, s.name, startPylon(t, cfg)), s.name+"-server", address)
			c := dialServer(t, address)
			c.waitServed(t, s.name+"-server")
			if _, err := c.call(method, "x-blocked", "yes"); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("an RPC the deny policy matches: %v, want PERMISSION_DENIED", err)
			} else {
				t.Logf("denied: %v", err)
			}
			if _, err := c.call("/pylon.interop.Admin/Reset"); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("a method no allow policy names: %v, want PERMISSION_DENIED", err)
			} else {
				t.Logf("not allowed: %v", err)
			}
		})
	}
}

// rbacRefusedByGRPCJS shows that Pylon refuses RBAC for a group of grpc-js
// servers (checked) and that such a server, served it anyway (unchecked),
// NACKs its Listener and so never binds its port.
func rbacRefusedByGRPCJS(t *testing.T, start func(*testing.T, string, string, string), checked, unchecked, cfg, address string) {
	_, err := compile.Compile(xdstype.New(), []config.File{{Path: "pylon.yaml", Data: []byte(checked)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "grpc-js of group \"interop\"") || !strings.Contains(err.Error(), "(rule hcm-filter-unknown)") {
		t.Fatalf("Pylon did not refuse RBAC for a group of grpc-js servers: %v", err)
	}
	t.Logf("refused: %v", err)
	writeAtomically(t, cfg, unchecked)
	start(t, writeServerBootstrap(t, "grpc-js", startPylon(t, cfg)), "grpc-js-server", address)
	c := dialServer(t, address)
	for range 3 {
		if _, err := c.call(method); status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Unavailable {
			t.Fatalf("grpc-js served a Listener with RBAC: %v", err)
		}
	}
}

// TestServersMTLSFromCertificateProviders (gRFC A29) with C-core's and
// grpc-js's xDS-enabled servers: their TLS comes from the certificate
// provider instance `pylon bootstrap --grpc --server --cert-dir` names,
// and requires a client certificate their CA signed: a client with one is
// served (and, where RBAC runs, refused with PERMISSION_DENIED for another
// identity), one without is refused at the handshake, and plaintext is not
// served.
func TestServersMTLSFromCertificateProviders(t *testing.T) {
	for _, s := range featureServers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ca := certstest.NewCA(t, "interop-ca")
			dir := t.TempDir()
			server := ca.Issue(t, certstest.Leaf{CommonName: "greeter", DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Both: true})
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirCert), server.CertPEM)
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirKey), server.KeyPEM)
			certstest.WriteFile(t, filepath.Join(dir, bootstrap.CertDirCA), ca.PEM)
			const allowed = "spiffe://example.org/ns/apps/sa/caller"
			extra := "    tls: {}\n"
			if s.name == "grpc-core" {
				extra += fmt.Sprintf("    rbac: { allow: [{ name: callers, principals: [%q] }] }\n", allowed)
			}
			port := freePort(t)
			address := fmt.Sprintf("127.0.0.1:%d", port)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, serverConfig(s.name, port, address, extra, false))
			o := node(s.name)
			o.XDSAddress, o.Server, o.CertDir = startPylon(t, cfg), true, dir
			content, err := bootstrap.GRPC(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "xds-bootstrap.json")
			certstest.WriteFile(t, path, content)
			s.start(t, path, s.name+"-server", address)

			dial := func(leaf *certstest.Leaf) serverConn {
				cfg := &tls.Config{RootCAs: certstest.Pool(ca), ServerName: "localhost", MinVersion: tls.VersionTLS12}
				if leaf != nil {
					cfg.Certificates = []tls.Certificate{ca.Issue(t, *leaf).TLS(t)}
				}
				conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				return serverConn{conn}
			}
			caller := certstest.Client(allowed)
			dial(&caller).waitServed(t, s.name+"-server")
			if s.name == "grpc-core" {
				intruder := certstest.Client("spiffe://example.org/ns/apps/sa/intruder")
				if _, err := dial(&intruder).call(method); status.Code(err) != codes.PermissionDenied {
					t.Fatalf("another identity: %v, want PERMISSION_DENIED", err)
				} else {
					t.Logf("another identity: %v", err)
				}
			}
			if _, err := dial(nil).call(method); status.Code(err) == codes.OK {
				t.Fatal("a client without a certificate was served")
			} else {
				t.Logf("no certificate: %v", err)
			}
			if _, err := dialServer(t, address).call(method); status.Code(err) == codes.OK {
				t.Fatal("a plaintext client was served")
			}
		})
	}
}
