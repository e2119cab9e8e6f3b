package integration

import (
	"fmt"
	"path/filepath"
	"testing"
)

// aggregateConfig is xds:///greeter over an aggregate of two services in
// priority order: primary, an EDS service on backend-0 in the given
// health, then fallback, a LOGICAL_DNS service naming backend-1 as
// localhost.
func aggregateConfig(ports []int, primaryHealth string) string {
	return fmt.Sprintf(`services:
- name: primary
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %d, health: %s }]
- name: fallback
  protocol: grpc
  type: logical_dns
  endpoints: [{ address: localhost, port: %d }]
- name: greeter
  protocol: grpc
  aggregate: [primary, fallback]
grpc:
- target: greeter
  to: [{ service: greeter }]
`, ports[0], primaryHealth, ports[1])
}

// TestGRPCAggregateFailsOverToALogicalDNSService (gRFC A37): an aggregate
// service sends RPCs to its first service with a healthy endpoint: to the
// LOGICAL_DNS fallback, which grpc-go resolves itself, while the primary's
// only endpoint is unhealthy, and back to the primary once it is healthy.
func TestGRPCAggregateFailsOverToALogicalDNSService(t *testing.T) {
	ports := startBackends(t, 2)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, aggregateConfig(ports, "unhealthy"))
	p := startPylon(t, cfg)
	if st := p.status(t); st.Refused != nil {
		t.Fatalf("refused: %s", st.Refused.Error)
	}
	client := p.grpcClient(t, "aggregate-client")
	if !eventually(func() bool { return onlyTo(func() string { return client.call(t) }, "backend-1", 10) }) {
		t.Fatal("RPCs did not all go to backend-1, the fallback over LOGICAL_DNS, while the primary has no healthy endpoint")
	}
	writeAtomically(t, cfg, aggregateConfig(ports, "healthy"))
	if !eventually(func() bool { return onlyTo(func() string { return client.call(t) }, "backend-0", 10) }) {
		t.Fatal("RPCs did not all go back to backend-0 once the primary was healthy")
	}
}
