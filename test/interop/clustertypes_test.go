package interop

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// aggregateConfig is xds:///greeter over an aggregate of primary, an EDS
// service on backend-0 in the given health, then fallback, a LOGICAL_DNS
// service naming backend-1 as localhost, for a group of client.
func aggregateConfig(client string, ports []int, primaryHealth string) string {
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
groups:
- name: interop
  match: { metadata: { client: %q }, region: interop, zone: zone-a }
  clients: [%s]
grpc:
- target: greeter
  to: [{ service: greeter }]
`, ports[0], primaryHealth, ports[1], client, client)
}

// TestClientsAggregateFailsOverToALogicalDNSService (gRFC A37) with each
// client: while the aggregate's primary has no healthy endpoint, every
// RPC goes to the LOGICAL_DNS fallback the client resolves itself; once
// the primary is healthy, back to it. Pylon refuses LOGICAL_DNS for a
// group of C-core (rule cluster-logical-dns-core): served anyway, C-core
// 1.51.1 fails over, then dies failing back.
func TestClientsAggregateFailsOverToALogicalDNSService(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports := startBackends(t, 2)
			doc := func(health string) string { return aggregateConfig(c.name, ports, health) }
			if c.name == "grpc-core" {
				_, err := compile.Compile(xdstype.New(), []config.File{{Path: "pylon.yaml", Data: []byte(doc("healthy"))}}, nil)
				if err == nil || !strings.Contains(err.Error(), "(rule cluster-logical-dns-core)") {
					t.Fatalf("Pylon did not refuse LOGICAL_DNS for a group of C-core: %v", err)
				}
				doc = func(health string) string {
					return strings.Replace(aggregateConfig(c.name, ports, health), "  clients: [grpc-core]\n", "", 1)
				}
			}
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, doc("unhealthy"))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			waitFor(t, cl, nil, "backend-1", "the LOGICAL_DNS fallback while the primary is unhealthy")
			for range 10 {
				expect(t, cl, nil, "backend-1", "the fallback, again")
			}
			writeAtomically(t, cfg, doc("healthy"))
			if c.name == "grpc-core" {
				coreDiesFailingBack(t, cl.(*subprocess))
				return
			}
			waitFor(t, cl, nil, "backend-0", "the primary once healthy")
			for range 10 {
				expect(t, cl, nil, "backend-0", "the primary, again")
			}
		})
	}
}

// coreDiesFailingBack makes RPCs, within bound, until the C-core client
// exits, as 1.51.1 does failing back from a LOGICAL_DNS cluster; an RPC
// answered by the primary means it no longer crashes, and the rule
// cluster-logical-dns-core should go.
func coreDiesFailingBack(t *testing.T, cl *subprocess) {
	t.Helper()
	cl.crashes.Store(true)
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		got, err := cl.call(method, nil)
		switch {
		case err != nil && (strings.Contains(err.Error(), "exited") || strings.Contains(err.Error(), "writing to the client")):
			t.Logf("C-core exited failing back from LOGICAL_DNS: %v", err)
			return
		case got == "backend-0":
			t.Fatal("C-core failed back to the primary and lives: it handles LOGICAL_DNS in an aggregate now; drop rule cluster-logical-dns-core")
		}
	}
	t.Fatalf("C-core neither failed back nor exited within %s", bound)
}
