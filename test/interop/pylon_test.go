package interop

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

// bound caps every wait in this package.
const bound = 20 * time.Second

// startBackends starts n gRPC servers on loopback that answer any unary
// method with their name ("backend-0", ...) as a StringValue, so a client
// without generated stubs can say where its RPC went. It returns the ports.
func startBackends(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("backend-%d", i)
		s := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			if err := stream.RecvMsg(&emptypb.Empty{}); err != nil {
				return err
			}
			return stream.SendMsg(wrapperspb.String(id))
		}))
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// writeAtomically replaces path as editors and deploy tools do: a temporary
// file renamed over the old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startPylon runs the daemon in file mode on loopback ports until the test
// ends and returns its xDS address.
func startPylon(t *testing.T, configPath string) string {
	t.Helper()
	o := daemontest.FileMode(configPath)
	o.Identifier = "pylon-interop"
	return daemontest.Start(t, o).XDS
}

// node is the node every client claims: the group in the config matches on
// its metadata and locality, so a bootstrap that lost either would leave
// the client with no configuration at all.
func node(client string) bootstrap.Options {
	return bootstrap.Options{
		NodeID:   "interop-" + client,
		Locality: bootstrap.Locality{Region: "interop", Zone: "zone-a"},
		Metadata: map[string]string{"client": client},
	}
}

// writeBootstrap writes the gRPC bootstrap exactly as
// `pylon bootstrap --grpc --node-id interop-<client> --locality interop/zone-a
// --metadata client=<client> --xds-address <xdsAddr>` prints it.
func writeBootstrap(t *testing.T, client, xdsAddr string) (path string, content []byte) {
	t.Helper()
	o := node(client)
	o.XDSAddress = xdsAddr
	content, err := bootstrap.GRPC(o)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "xds-bootstrap.json")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

// greeterConfig is the model config of xds:///greeter: v1 on backend-0 and
// v2 on backend-1; RPCs of the Greeter service with x-user-group: beta go
// to beta, every other RPC to dflt. Only nodes of the client's group (by
// metadata and locality) see it.
func greeterConfig(client string, ports []int, beta, dflt string) string {
	return fmt.Sprintf(`services:
- { name: v1, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
- { name: v2, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
groups:
- name: interop
  match: { metadata: { client: %q }, region: interop, zone: zone-a }
grpc:
- target: greeter
  routes:
  - match: { prefix: /pylon.interop.Greeter/, headers: [{ name: x-user-group, exact: beta }] }
    to: [{ service: %s }]
  to: [{ service: %s }]
`, ports[0], ports[1], client, beta, dflt)
}
