package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Offline, explain checks a gRPC call for the client given: each kind of
// client says what it does with the same resources (grpc-go fails the RPC
// a redirect takes, grpc-js NACKs the route configuration, C-core serves
// no RPC over ring hash); without --client, a group's clients: are the
// clients; an HTTP request takes no --client.
func TestExplainChecksTheCallForEachClient(t *testing.T) {
	cfg := filepath.Join("testdata", "grpc_explain_clients.yaml")
	for _, c := range []struct {
		client, url string
		want        []string
	}{
		{"grpc-go", "xds:///greeter/old.Service/Method", []string{
			"gRPC client   grpc-go (given with --client), rules of grpc-go v1.85.0\n",
			`  this call   grpc-go accepts RouteConfiguration "greeter" and fails this RPC (rule route-action)` + "\n",
			`  fails RPCs  RouteConfiguration "greeter": virtual_hosts[0].routes[0].redirect: `,
		}},
		{"grpc-js", "xds:///greeter/pkg.Service/Method", []string{
			`  this call   grpc-js NACKs RouteConfiguration "greeter" (rule route-action-nack): it runs what it last ACKed of it`,
			`  NACK        RouteConfiguration "greeter": virtual_hosts[0].routes[0].redirect: not a route action gRPC clients implement; route RPCs to a cluster (rule route-action-nack, docs/grpc.md#refusals)` + "\n",
		}},
		{"grpc-core", "xds:///greeter/pkg.Service/Method", []string{
			`  this call   grpc-core accepts Cluster "ring" and fails this RPC (rule cluster-ring-hash-core)` + "\n",
			`  fails RPCs  Cluster "ring": lb_policy: RING_HASH: C-core 1.51.1 serves no RPC over it`,
		}},
	} {
		code, out, stderr := run("explain", "--config", cfg, "--group", "apps", "--client", c.client, c.url)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.client, code, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: missing %q in:\n%s", c.client, want, out)
			}
		}
	}

	code, out, stderr := run("explain", "--config", cfg, "--node-id", "go-1", "xds:///plain/pkg.Service/Method", "-o", "json")
	if code != 0 {
		t.Fatalf("the group's clients: exit %d: %s", code, stderr)
	}
	var e struct {
		Result struct {
			GRPCClients []struct {
				Client, From, Call string
				Passes             bool
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if c := e.Result.GRPCClients; len(c) != 1 || c[0].Client != "grpc-go" || !c[0].Passes || c[0].From != "in the group's clients:" || c[0].Call != "grpc-go takes this RPC as explained" {
		t.Errorf("the group's clients: %+v", c)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--client", "grpc-rust", "xds:///greeter/a.B/C"}, `--client "grpc-rust": want one of grpc-go, grpc-core, grpc-js`},
		{[]string{"--client", "grpc-go", "http://greeter/"}, "--client checks a proxyless gRPC call"},
	} {
		if code, _, stderr := run(append([]string{"explain", "--config", cfg, "--group", "apps"}, c.args...)...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// On a running Pylon, explain checks a node's gRPC call for the
// implementation its stream's user agent reads as, and says so.
func TestExplainChecksTheCallForTheNodesOwnClient(t *testing.T) {
	d := startServe(t) // the embedded quickstart: the target greeter
	doc := filepath.Join(t.TempDir(), "old.yaml")
	writeFile(t, doc, `resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: greeter
  virtual_hosts:
  - name: greeter
    domains: [greeter]
    routes:
    - match: { prefix: /old }
      redirect: { host_redirect: greeter }
    - match: { prefix: "" }
      route: { cluster: greeter }
`)
	d.must(t, "apply", "-f", doc)
	conn := xdstest.Dial(t, d.xds)
	for _, n := range []*corev3.Node{
		{Id: "js-1", UserAgentName: "gRPC Node Pure JS", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.14.1"}},
		{Id: "go-1", UserAgentName: "gRPC Go", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.85.0"}},
	} {
		s := xdstest.OpenADS(t, conn, n)
		s.Request(xdstype.ListenerURL, "greeter")
		s.RecvType(xdstype.ListenerURL)
	}
	out := d.must(t, "explain", "--node-id", "js-1", "xds:///greeter/old.Service/Method")
	for _, want := range []string{
		"gRPC client   grpc-js (its stream's user agent reads as grpc-js 1.14.1, the node's own word)",
		`  this call   grpc-js NACKs RouteConfiguration "greeter" (rule route-action-nack)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("js-1: missing %q in:\n%s", want, out)
		}
	}
	out = d.must(t, "explain", "--node-id", "go-1", "xds:///greeter/old.Service/Method")
	if want := `  this call   grpc-go accepts RouteConfiguration "greeter" and fails this RPC (rule route-action)`; !strings.Contains(out, want) {
		t.Errorf("go-1: missing %q in:\n%s", want, out)
	}
	// A node with no stream here, and no --client nor clients: in its
	// group: no client to check for.
	if out := d.must(t, "explain", "--node-id", "absent", "xds:///greeter/old.Service/Method"); strings.Contains(out, "\ngRPC client ") {
		t.Errorf("absent:\n%s", out)
	}
}
