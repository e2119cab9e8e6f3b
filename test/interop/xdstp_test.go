package interop

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
)

// The federated names the config below serves (TP1, gRPC A47): every
// resource grpc-go needs for xds://pylon.example/greeter, under the
// authority pylon.example, the cluster and its route with context
// parameters (sorted by key, as Pylon requires and grpc-go asks).
const (
	fedAuthority = "pylon.example"
	fedListener  = "xdstp://pylon.example/envoy.config.listener.v3.Listener/greeter"
	fedRoute     = "xdstp://pylon.example/envoy.config.route.v3.RouteConfiguration/greeter?env=interop"
	fedCluster   = "xdstp://pylon.example/envoy.config.cluster.v3.Cluster/greeter/v1?env=interop&tier=a"
	fedEndpoints = "xdstp://pylon.example/envoy.config.endpoint.v3.ClusterLoadAssignment/greeter/v1?env=interop&tier=a"
)

// federatedConfig serves only xdstp:// names, so an RPC gets through only
// if the client asked for each resource by its federated name. The
// assignment points at port.
func federatedConfig(port int) string {
	return fmt.Sprintf(`version: 1
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: %[1]s
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: greeter
      rds:
        route_config_name: %[2]q
        config_source: { ads: {}, resource_api_version: V3 }
      http_filters:
      - name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: %[2]q
  virtual_hosts:
  - name: greeter
    domains: ["*"]
    routes:
    - match: { prefix: "" }
      route: { cluster: %[3]q }
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %[3]q
  type: EDS
  connect_timeout: 1s
  eds_cluster_config:
    service_name: %[4]q
    eds_config: { ads: {}, resource_api_version: V3 }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %[4]q
  endpoints:
  - locality: { region: interop }
    load_balancing_weight: 1
    lb_endpoints:
    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %[5]d } } }
`, fedListener, fedRoute, fedCluster, fedEndpoints, port)
}

// federatedBootstrap is `pylon bootstrap --grpc`'s bootstrap plus an
// authorities entry naming Pylon's server for pylon.example, with the
// template grpc-go turns xds://pylon.example/greeter into fedListener by.
func federatedBootstrap(t *testing.T, xdsAddr string) []byte {
	t.Helper()
	_, js := writeBootstrap(t, "grpc-go-federation", xdsAddr)
	var b map[string]any
	if err := json.Unmarshal(js, &b); err != nil {
		t.Fatalf("pylon's gRPC bootstrap is not JSON: %v", err)
	}
	b["authorities"] = map[string]any{fedAuthority: map[string]any{
		"xds_servers":                            b["xds_servers"],
		"client_listener_resource_name_template": "xdstp://" + fedAuthority + "/envoy.config.listener.v3.Listener/%s",
	}}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestX46_grpc_go_federation: grpc-go's xDS client, told that Pylon serves
// the authority pylon.example, dials xds://pylon.example/greeter and asks
// for the listener, route, cluster and assignment by their xdstp:// names,
// context parameters included; its RPC reaches the backend, and follows a
// change of the assignment.
func TestX46_grpc_go_federation(t *testing.T) {
	ports := startBackends(t, 2)
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, federatedConfig(ports[0]))
	cl := startGoClientTarget(t, federatedBootstrap(t, startPylon(t, cfg)), "xds://"+fedAuthority+"/greeter")

	expect(t, cl, nil, "backend-0", "first RPC over xdstp:// names")
	writeAtomically(t, cfg, federatedConfig(ports[1]))
	waitFor(t, cl, nil, "backend-1", "the assignment after the change")
}

// startGoClientTarget is startGoClient dialing target.
func startGoClientTarget(t *testing.T, bootstrapJSON []byte, target string) *goClient {
	t.Helper()
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient(target, grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &goClient{conn: conn}
}
