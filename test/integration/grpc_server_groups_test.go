package integration

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// TestGRPCServerGroupsPlaceTheListener (gRFC A36): a target's server.groups
// brings the server Listener to the nodes of the groups it names, even a
// group whose scope names only its services; grpc-go's xDS server of that
// group serves. (Which groups do not get it: compile's
// TestGRPCServerGoesOnlyToItsGroups.)
func TestGRPCServerGroupsPlaceTheListener(t *testing.T) {
	lis := listenLoopback(t)
	port := lis.Addr().(*net.TCPAddr).Port
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, fmt.Sprintf(`groups:
- name: greeter-servers
  match: { id: "server-*" }
  scope: { services: [greeter] }
- name: everyone-else
  default: true
services:
- name: greeter
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %[1]d }]
grpc:
- target: greeter
  to: [{ service: greeter }]
  server: { listen: "127.0.0.1:%[1]d", groups: [greeter-servers] }
`, port))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	s := startXDSServer(t, lis, p.xdsAddr, "server-1")
	s.waitServing(t)
	if err := directCall(t, port, insecure.NewCredentials()); err != nil {
		t.Fatalf("an RPC to the serving xDS server: %v", err)
	}
}
