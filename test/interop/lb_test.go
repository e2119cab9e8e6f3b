package interop

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestClientsPickFirstSendsEveryRPCToTheFirstBackend (gRFC A62): a
// service's lb: pick_first, written as load_balancing_policy (A52), sends
// grpc-go's every RPC to the first endpoint of the assignment. Pylon
// refuses it for a group of C-core, which ignores load_balancing_policy
// (served anyway, its RPCs go round robin, shown here), and of grpc-js,
// which NACKs it (TestClientsRejectWhatTheirGroupRefuses/grpc-js/pick_first).
func TestClientsPickFirstSendsEveryRPCToTheFirstBackend(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports := startBackends(t, 3)
			doc := featureConfig(c.name, ports, "  lb: pick_first", "")
			if c.name != "grpc-go" {
				_, err := compile.Compile(xdstype.New(), []config.File{{Path: "pylon.yaml", Data: []byte(doc)}}, nil)
				if err == nil || !strings.Contains(err.Error(), "(rule cluster-lb-config") {
					t.Fatalf("Pylon did not refuse pick_first for a group of %s: %v", c.name, err)
				}
				if c.name == "grpc-js" {
					return
				}
				doc = strings.Replace(doc, "  clients: [grpc-core]\n", "", 1)
			}
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, doc)
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			seen := map[string]int{}
			for range 30 {
				got, err := cl.call(method, nil)
				if err != nil {
					t.Fatalf("RPC: %v", err)
				}
				seen[got]++
			}
			switch {
			case c.name == "grpc-core" && len(seen) > 1:
				t.Logf("C-core 1.51.1 ignores pick_first: %v", seen)
			case c.name == "grpc-core":
				t.Fatalf("C-core sent every RPC to one backend (%v): it implements pick_first now; drop rule cluster-lb-config-core", seen)
			case len(seen) != 1 || seen["backend-0"] != 30:
				t.Fatalf("30 RPCs reached %v, want all on backend-0", seen)
			}
		})
	}
}

// TestClientsWRRLocalityIsRoundRobinByLocality (gRFC A52): lb:
// wrr_locality over round robin, which every client takes (C-core by
// ignoring it for lb_policy ROUND_ROBIN, which does the same), reaches
// every backend.
func TestClientsWRRLocalityIsRoundRobinByLocality(t *testing.T) {
	for _, c := range featureClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ports := startBackends(t, 3)
			cfg := filepath.Join(t.TempDir(), "pylon.yaml")
			writeAtomically(t, cfg, featureConfig(c.name, ports, "  lb: wrr_locality", ""))
			path, js := writeBootstrap(t, c.name, startPylon(t, cfg))
			cl := c.start(t, path, js)
			seen := map[string]int{}
			if !within(func() bool {
				got, err := cl.call(method, nil)
				if err != nil {
					t.Fatalf("RPC: %v", err)
				}
				seen[got]++
				return len(seen) == 3
			}) {
				t.Fatalf("RPCs reached %v, want all 3 backends", seen)
			}
		})
	}
}
