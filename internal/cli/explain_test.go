package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// explainConfig has two groups and a route test that fails: explain still
// explains it (that is when one needs it).
const explainConfig = `services:
- { name: cart, endpoints: [{ address: 10.0.0.1, port: 8080, region: eu, zone: eu-1a }] }
- { name: cart-canary, endpoints: [{ address: 10.0.0.2, port: 8080, priority: 1, health: unhealthy }] }
routes:
- name: shop
  virtual_hosts:
  - name: shop
    domains: [shop.example.com]
    routes:
    - match: { prefix: /api/cart, headers: [{ name: x-canary, exact: "1" }] }
      to: [{ service: cart-canary }]
    - match: { prefix: /api }
      to: [{ service: cart, weight: 3 }, { service: cart-canary, weight: 1 }]
listeners:
- { name: http, port: 8080, routes: shop }
groups:
- { name: edge, match: { id: "edge-*", metadata: { tier: gold } } }
- { name: rest, default: true }
tests:
- name: broken on purpose
  group: edge
  request: { url: "http://shop.example.com/", port: 8080 }
  expect: { cluster: cart }
`

func TestExplainFileMode(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeFile(t, cfg, explainConfig)

	// The node is put in its group by the rules: metadata tier=gold.
	code, out, stderr := run("explain", "--config", cfg, "--node", "edge-1", "--metadata", "tier=gold", "--port", "8080",
		"GET", "http://shop.example.com/api/cart", "-H", "X-Canary: 1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`node          "edge-1" in group "edge"`,
		`config        files ` + cfg,
		`  header      x-canary: 1`,
		`listener      "http" (0.0.0.0:8080), found by port 8080 (given)`,
		`virtual host  "shop" (host "shop.example.com" matched exact domain "shop.example.com")`,
		`route         #0 (prefix "/api/cart", header x-canary = "1")`,
		`cluster "cart-canary"  100%  EDS`,
		`  10.0.0.2:8080  -         1         UNHEALTHY  1       no`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing line %q in:\n%s", want, out)
		}
	}

	// Without the metadata the node falls to the default group.
	_, out, _ = run("explain", "--config", cfg, "--node", "edge-1", "--port", "8080", "http://shop.example.com/api")
	if !strings.Contains(out, `in group "rest"`) {
		t.Errorf("node without metadata:\n%s", out)
	}

	// -o json: the whole result, with the split's shares.
	code, out, stderr = run("explain", "--config", cfg, "--group", "edge", "--port", "8080", "http://shop.example.com/api/x", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var e struct {
		Group  string
		Result struct {
			Route    struct{ ID string }
			Clusters []struct {
				Name      string
				Share     float64
				Endpoints []struct {
					Address, Region, Zone string
					Serving               bool
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	c := e.Result.Clusters
	if e.Group != "edge" || e.Result.Route.ID != "#1" || len(c) != 2 || c[0].Name != "cart" || c[0].Share != 0.75 || c[1].Share != 0.25 ||
		c[0].Endpoints[0].Zone != "eu-1a" || !c[0].Endpoints[0].Serving {
		t.Errorf("json: %+v", e)
	}
}

func TestExplainErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeFile(t, cfg, explainConfig)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "edge", "http://shop.example.com/"}, `no listener on port 80 (http's default) on this node; give the port or the listener (listeners: http (0.0.0.0:8080))`},
		{[]string{"--group", "edge", "--listener", "nope", "http://shop.example.com/"}, `no listener "nope" on this node`},
		{[]string{"--cluster", "edge", "http://shop.example.com/"}, "give its --node-id too"},
		{[]string{"--node", "a", "--group", "edge", "http://shop.example.com/"}, "not both"},
		{[]string{"http://shop.example.com/"}, "the config has several groups (edge, rest): give a node or a group"},
		{[]string{"--group", "egde", "http://shop.example.com/"}, `no group "egde" (the groups are edge, rest)`},
		{[]string{"--group", "edge", "ftp://x/"}, "want http://, https:// or xds:///target/pkg.Service/Method"},
		{[]string{"--group", "edge", "http://x/", "-H", "novalue"}, `header "novalue": write it as "name: value"`},
		{[]string{"--group", "edge", "--locality", "a/b/c/d", "http://x/"}, "--locality"},
	} {
		code, _, stderr := run(append([]string{"explain", "--config", cfg}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
	// A config that does not compile says so.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "listeners: [{ name: l, port: 1, routes: nope }]\n")
	if code, _, stderr := run("explain", "--config", bad, "http://x/"); code != 1 || !strings.Contains(stderr, `config refused:`) || !strings.Contains(stderr, `no route table "nope"`) {
		t.Errorf("bad config: exit %d, %q", code, stderr)
	}
}

// Against a running Pylon: the stored config, read with the read token and
// compiled here; a raw Secret comes redacted and still compiles (an empty
// Secret of its name stands in); a file-mode Pylon points at --config.
func TestExplainStoredConfig(t *testing.T) {
	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "tls.yaml")
	writeFile(t, doc, `resources:
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: shop-cert
  tls_certificate:
    certificate_chain: { inline_string: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" }
    private_key: { inline_string: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n" }
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: https
  address: { socket_address: { address: 0.0.0.0, port_value: 8443 } }
  listener_filters:
  - name: envoy.filters.listener.tls_inspector
    typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector }
  filter_chains:
  - filter_chain_match: { server_names: [shop.example.com] }
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
        common_tls_context:
          tls_certificate_sds_secret_configs: [{ name: shop-cert, sds_config: { ads: {}, resource_api_version: V3 } }]
    filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: https
        rds: { route_config_name: shop, config_source: { ads: {}, resource_api_version: V3 } }
        http_filters:
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
services:
- { name: shop, endpoints: [{ address: 10.1.0.1, port: 8443 }] }
routes:
- { name: shop, virtual_hosts: [{ name: shop, domains: ["shop.example.com"], routes: [{ to: [{ service: shop }] }] }] }
`)
	d.must(t, "apply", "-f", doc)
	out := d.must(t, "explain", "--node", "any", "--port", "8443", "https://shop.example.com/")
	for _, want := range []string{
		`config        stored revision `,
		`filter chain  "#0" (matched on server name shop.example.com)`,
		`cluster "shop"  100%  EDS`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MIIE") {
		t.Error("key material in the output")
	}
	// The quickstart the store was seeded with.
	out = d.must(t, "explain", "--node", "x", "http://127.0.0.1:10000/backend/a")
	if !strings.Contains(out, `cluster "backend"  100%  EDS`) {
		t.Errorf("quickstart:\n%s", out)
	}

	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeFile(t, cfg, goodCluster)
	f := startServe(t, "--config", cfg)
	if code, _, stderr := f.cli("explain", "--node", "x", "http://x/"); code != 1 || !strings.Contains(stderr, "give them with --config") {
		t.Errorf("file mode: exit %d, %q", code, stderr)
	}
}

// pylon validate runs the route tests: a failing one refuses the config,
// named with what matched instead; passing ones are counted.
func TestValidateRunsRouteTests(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeFile(t, cfg, explainConfig)
	code, _, stderr := run("validate", cfg)
	want := `route test "broken on purpose": expect.cluster: want cluster "cart" alone; got listener "http", filter chain "#0", virtual host "shop": no route of virtual host shop matches: the proxy answers 404 (group edge)`
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %q", code, stderr, want)
	}
	fixed := strings.Replace(explainConfig, `url: "http://shop.example.com/"`, `url: "http://shop.example.com/api"`, 1)
	writeFile(t, cfg, strings.Replace(fixed, "expect: { cluster: cart }", "expect: { clusters: { cart: 75, cart-canary: 25 } }", 1))
	code, out, stderr := run("validate", cfg)
	if code != 0 || !strings.Contains(out, "  route tests: 1 passed\n") {
		t.Errorf("exit %d, %q, %q", code, out, stderr)
	}
}

// serve --config: an edit that breaks a route test is refused, shown first
// in pylon status with the test named, and the previous version keeps
// serving.
func TestServeRefusesEditBreakingRouteTest(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	good := strings.Replace(explainConfig, "expect: { cluster: cart }", "expect: { status: 404 }", 1)
	writeFile(t, cfg, good)
	d := startServe(t, "--config", cfg)
	version := func() string {
		var st struct {
			Status struct {
				Config struct{ Version string } `json:"config"`
			} `json:"status"`
		}
		if err := json.Unmarshal([]byte(d.must(t, "status", "-o", "json")), &st); err != nil {
			t.Fatal(err)
		}
		return st.Status.Config.Version
	}
	before := version()
	if before == "" {
		t.Fatal("no version served")
	}
	// A catch-all route added first: valid Envoy, but "/" now answers.
	writeFile(t, cfg, strings.Replace(good, "    routes:\n    - match: { prefix: /api/cart",
		"    routes:\n    - to: [{ service: cart }]\n    - match: { prefix: /api/cart", 1))
	var out string
	eventually(t, "the refusal in pylon status", func() bool {
		out = d.must(t, "status")
		return strings.Contains(out, "REFUSED")
	})
	want := `route test "broken on purpose": expect.status: want status 404; got listener "http", filter chain "#0", virtual host "shop", route "#0": forwarded to cart (group edge)`
	if !strings.Contains(out, want) || !strings.Contains(out, "still serving the previous config, version "+before) {
		t.Errorf("status:\n%s\nwant %q and version %s", out, want, before)
	}
	if v := version(); v != before {
		t.Errorf("serving version %s after the refusal, want %s", v, before)
	}
}
