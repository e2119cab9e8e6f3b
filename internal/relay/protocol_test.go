package relay_test

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// envoyConfig is an Envoy's config: a listener whose routes send
// everything to cluster, with EDS clusters c1 and c2 and their
// assignments.
func envoyConfig(cluster string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: ingress
  address: { socket_address: { address: 0.0.0.0, port_value: 10000 } }
  filter_chains:
  - filters:
    - name: hcm
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: ingress
        rds: { route_config_name: ingress, config_source: { ads: {}, resource_api_version: V3 } }
        http_filters:
        - name: router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: ingress
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: { prefix: "/" }
      route: { cluster: %s }
`, cluster)
	for i, c := range []string{"c1", "c2"} {
		if c == "c2" && cluster != "c2" {
			continue // c2 comes with the change that routes to it
		}
		fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %[1]s
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %[1]s
  endpoints:
  - lb_endpoints:
    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %[2]d } } }
`, c, 9001+i)
	}
	return b.String()
}

// TestRelayKeepsMakeBeforeBreak runs xdstest's model of an Envoy, state of
// the world and delta, against the relay in front of a Pylon: it gets the
// whole config, and a change routing to a new cluster never reaches it
// before that cluster has its endpoints.
func TestRelayKeepsMakeBeforeBreak(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprintf("delta=%v", delta), func(t *testing.T) {
			up := startUpstream(t, "", envoyConfig("c1"))
			rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
			p := xdstest.NewProxy(t, xdstest.Dial(t, rd.xds), "envoy-1", delta)
			// Stepped while responses come, not settled with xdstest's
			// probe: the probe is a Runtime resource, which a relay does
			// not relay.
			if !eventually(func() bool {
				p.StepIfReady()
				return p.Listeners["ingress"] != nil && p.Routes["ingress"] != nil && p.Endpoints["c1"] != nil
			}) {
				t.Fatalf("the proxy holds listeners %v, routes %v, endpoints %v; want the whole config", len(p.Listeners), len(p.Routes), len(p.Endpoints))
			}
			writeAtomically(t, up.cfg, envoyConfig("c2"))
			if !eventually(func() bool {
				p.StepIfReady()
				targets := p.RouteTargets()["ingress"]
				return len(targets) == 1 && targets[0] == "c2" && p.Endpoints["c2"] != nil
			}) {
				t.Fatal("the change to route to c2 did not reach the proxy")
			}
			if len(p.Violations) > 0 {
				t.Fatalf("make-before-break broken through the relay:\n%s", strings.Join(p.Violations, "\n"))
			}
		})
	}
}

// TestRelayServesEveryVariant: through the relay, the clusters reach a
// client on each of xDS's four variants: state of the world and delta,
// aggregated and per type.
func TestRelayServesEveryVariant(t *testing.T) {
	up := startUpstream(t, "", envoyConfig("c1"))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	conn := xdstest.Dial(t, rd.xds)
	cds := xdstype.New().Lookup(xdstype.ClusterURL)
	node := func(id string) *corev3.Node { return &corev3.Node{Id: id, Cluster: "e2e"} }
	for name, s := range map[string]*xdstest.Stream{
		"SotW ADS":      xdstest.OpenADS(t, conn, node("sotw-ads")),
		"SotW per type": xdstest.OpenType(t, conn, cds, node("sotw-cds")),
	} {
		s.Request(xdstype.ClusterURL)
		if resp := s.RecvType(xdstype.ClusterURL); len(resp.Resources) != 1 {
			t.Errorf("%s: %d clusters, want 1", name, len(resp.Resources))
		}
	}
	for name, s := range map[string]*xdstest.DeltaStream{
		"delta ADS":      xdstest.OpenDeltaADS(t, conn, node("delta-ads")),
		"delta per type": xdstest.OpenDeltaType(t, conn, cds, node("delta-cds")),
	} {
		s.Subscribe(xdstype.ClusterURL, "*")
		if resp := s.RecvType(xdstype.ClusterURL); len(resp.Resources) != 1 {
			t.Errorf("%s: %d clusters, want 1", name, len(resp.Resources))
		}
	}
}
