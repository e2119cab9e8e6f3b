package explain

import (
	"fmt"
	"strings"
	"testing"
)

// modelConfig is the model's gRPC targets over the backends: per-method
// and per-metadata routes, a 1:3 split, a service of two endpoints, a
// service whose priority 0 is unhealthy (traffic goes to priority 1), and
// a target without a default route.
func modelConfig(p []int) string {
	return fmt.Sprintf(`services:
- { name: v1, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %[1]d }] }
- { name: v2, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %[2]d }] }
- { name: admin, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %[3]d }] }
- name: pair
  protocol: grpc
  endpoints: [{ address: 127.0.0.1, port: %[4]d }, { address: 127.0.0.1, port: %[5]d }]
- name: tiered
  protocol: grpc
  endpoints:
  - { address: 127.0.0.1, port: %[1]d, priority: 0, health: unhealthy }
  - { address: 127.0.0.1, port: %[6]d, priority: 1, health: healthy }
- { name: empty, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %[6]d }] }
grpc:
- target: greeter
  routes:
  - match: { path: /grpc.testing.TestService/EmptyCall }
    to: [{ service: empty }]
  - match: { prefix: /grpc.testing.TestService/Unary, headers: [{ name: x-user-group, exact: beta }] }
    to: [{ service: v2 }]
  - match: { regex: "/grpc\\.testing\\.TestService/Unary.*", headers: [{ name: x-tenant, regex: "t-[0-9]+" }] }
    to: [{ service: admin }]
  - match: { headers: [{ name: x-split, present: true }] }
    to: [{ service: v1, weight: 1 }, { service: v2, weight: 3 }]
  - match: { headers: [{ name: x-pair, prefix: "y" }] }
    to: [{ service: pair }]
  - match: { headers: [{ name: x-tiered, present: true }] }
    to: [{ service: tiered }]
  to: [{ service: v1 }]
- target: strict
  routes:
  - match: { headers: [{ name: x-allowed, exact: "yes" }] }
    to: [{ service: admin }]
`, p[0], p[1], p[2], p[3], p[4], p[5])
}

// TestExplainAgreesWithGRPCOnModelRoutes: on a config file served by a
// running Pylon, `pylon explain --config` says, for each RPC, where
// grpc-go's xDS client sends it.
func TestExplainAgreesWithGRPCOnModelRoutes(t *testing.T) {
	bs := startBackends(t, 6)
	cfg := writeConfig(t, modelConfig(bs.ports))
	p := startPylon(t, cfg)
	greeter := p.client(t, "explain-e2e", "greeter")
	strict := p.client(t, "explain-e2e", "strict")
	source := []string{"--config", cfg}

	for _, c := range []struct {
		target string
		rpc    rpc
		n      int
	}{
		{"greeter", rpc{name: "no metadata: the target's default", method: "UnaryCall"}, 20},
		{"greeter", rpc{name: "another method", method: "EmptyCall", headers: []string{"x-user-group: beta"}}, 20},
		{"greeter", rpc{name: "exact metadata", method: "UnaryCall", headers: []string{"x-user-group: beta"}}, 20},
		{"greeter", rpc{name: "exact is case-sensitive", method: "UnaryCall", headers: []string{"x-user-group: Beta"}}, 20},
		{"greeter", rpc{name: "regex on path and metadata", method: "UnaryCall", headers: []string{"x-tenant: t-42"}}, 20},
		{"greeter", rpc{name: "regex matches the whole value", method: "UnaryCall", headers: []string{"x-tenant: t-42x"}}, 20},
		{"greeter", rpc{name: "1:3 split", method: "UnaryCall", headers: []string{"x-split: 1"}}, 400},
		{"greeter", rpc{name: "two endpoints", method: "UnaryCall", headers: []string{"x-pair: yes"}}, 40},
		{"greeter", rpc{name: "priority 0 unhealthy", method: "UnaryCall", headers: []string{"x-tiered: 1"}}, 20},
		{"strict", rpc{name: "a matching route", method: "UnaryCall", headers: []string{"x-allowed: yes"}}, 10},
		{"strict", rpc{name: "no route matches", method: "UnaryCall", headers: []string{"x-allowed: no"}}, 10},
	} {
		e := explainRPC(t, p, source, "explain-e2e", c.target, c.rpc)
		client := greeter
		if c.target == "strict" {
			client = strict
			// The client must hold the config before a call can fail on
			// its routes rather than wait for them.
			warm(t, strict, rpc{method: "UnaryCall", headers: []string{"x-allowed: yes"}})
		}
		check(t, bs, client, c.rpc, expect(t, e), c.n)
	}
}

// rawConfig is raw Envoy resources: virtual hosts chosen by domain (the
// target "greeter" matches the suffix wildcard "*eter" before the prefix
// wildcard "greet*" and "*"), and routes with matchers the model does not
// write: a case-insensitive prefix, an inverted regex, a range, a suffix,
// a three-way split; and c0 has a second locality without a weight, which
// gRPC clients drop.
func rawConfig(p []int) string {
	var b strings.Builder
	b.WriteString(`resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: greeter
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: greeter
      rds: { route_config_name: raw, config_source: { ads: {}, resource_api_version: V3 } }
      http_filters:
      - name: router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: raw
  virtual_hosts:
  - name: any
    domains: ["*"]
    routes: [{ match: { prefix: "" }, route: { cluster: c5 } }]
  - name: prefix
    domains: ["greet*"]
    routes: [{ match: { prefix: "" }, route: { cluster: c5 } }]
  - name: suffix
    domains: ["*eter"]
    routes:
    - name: empty-any-case
      match: { prefix: /GRPC.TESTING.TESTSERVICE/EMPTY, case_sensitive: false }
      route: { cluster: c1 }
    - name: not-three-digits
      match: { safe_regex: { regex: "/grpc\\.testing\\.TestService/Unary.*" }, headers: [{ name: x-code, safe_regex_match: { regex: "\\d{3}" }, invert_match: true }] }
      route: { cluster: c2 }
    - name: range
      match: { prefix: "", headers: [{ name: x-n, range_match: { start: 10, end: 20 } }] }
      route: { cluster: c3 }
    - name: prod-suffix
      match: { prefix: "", headers: [{ name: x-env, string_match: { suffix: "-prod" } }] }
      route: { cluster: c4 }
    - name: three-way
      match: { prefix: "", headers: [{ name: x-three, present_match: true }] }
      route:
        weighted_clusters:
          clusters: [{ name: c0, weight: 1 }, { name: c1, weight: 1 }, { name: c2, weight: 2 }]
    - name: default
      match: { prefix: "" }
      route: { cluster: c0 }
`)
	for i, port := range p {
		fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: c%[1]d
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: c%[1]d
  endpoints:
  - locality: { region: r%[1]d }
    load_balancing_weight: 1
    lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %[2]d } } } }]
`, i, port)
		if i == 0 {
			// A locality without a weight: gRPC drops it, so c0's calls
			// never reach the last backend.
			fmt.Fprintf(&b, `  - locality: { region: unweighted }
    lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %d } } } }]
`, p[len(p)-1])
		}
	}
	return b.String()
}

// TestExplainAgreesWithGRPCOnStoredRawRoutes: the config applied to a
// running Pylon's store, explained from the admin API (stored objects
// compiled by the CLI), agrees with grpc-go's routing.
func TestExplainAgreesWithGRPCOnStoredRawRoutes(t *testing.T) {
	bs := startBackends(t, 6)
	p := startPylon(t, "")
	p.cli(t, "apply", "-f", writeConfig(t, rawConfig(bs.ports)))
	greeter := p.client(t, "explain-raw", "greeter")
	warm(t, greeter, rpc{method: "UnaryCall"})
	for _, c := range []struct {
		rpc rpc
		n   int
	}{
		{rpc{name: "default route of the suffix-wildcard host", method: "UnaryCall", headers: []string{"x-code: 123"}}, 20},
		{rpc{name: "case-insensitive prefix", method: "EmptyCall"}, 20},
		{rpc{name: "inverted regex: 1234 is not three digits", method: "UnaryCall", headers: []string{"x-code: 1234"}}, 20},
		{rpc{name: "inverted regex on a missing header does not match", method: "UnaryCall", headers: []string{"x-n: 15"}}, 20},
		{rpc{name: "range end excluded", method: "UnaryCall", headers: []string{"x-code: 123", "x-n: 20"}}, 20},
		{rpc{name: "suffix", method: "UnaryCall", headers: []string{"x-code: 123", "x-env: eu-prod"}}, 20},
		{rpc{name: "three-way split", method: "UnaryCall", headers: []string{"x-code: 123", "x-three: 1"}}, 400},
	} {
		e := explainRPC(t, p, nil, "explain-raw", "greeter", c.rpc)
		if !strings.HasPrefix(e.Result.VirtualHost.Name, "suffix") {
			t.Errorf("%s: explain picked virtual host %q", c.rpc.name, e.Result.VirtualHost.Name)
		}
		check(t, bs, greeter, c.rpc, expect(t, e), c.n)
	}
}
