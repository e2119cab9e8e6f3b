package route

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/grpcrules"
)

// clientResources are a target greeter whose route for /old redirects, its
// cluster balanced by ring hash, and an Envoy listener's cluster the gRPC
// client never fetches, with an LB policy no gRPC client implements.
func clientResources(t *testing.T) *Resources {
	t.Helper()
	parse := func(js string, m proto.Message) {
		if err := protojson.Unmarshal([]byte(js), m); err != nil {
			t.Fatal(err)
		}
	}
	l, rc, ring, envoy, cla := &listenerv3.Listener{}, &routev3.RouteConfiguration{}, &clusterv3.Cluster{}, &clusterv3.Cluster{}, &endpointv3.ClusterLoadAssignment{}
	parse(`{"name": "greeter", "api_listener": {"api_listener": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
	  "rds": {"route_config_name": "greeter", "config_source": {"ads": {}}},
	  "http_filters": [{"name": "router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}}`, l)
	parse(`{"name": "greeter", "virtual_hosts": [{"name": "greeter", "domains": ["greeter"], "routes": [
	  {"name": "old", "match": {"prefix": "/old"}, "redirect": {"host_redirect": "x"}},
	  {"name": "all", "match": {"prefix": ""}, "route": {"cluster": "ring"}}]}]}`, rc)
	parse(`{"name": "ring", "type": "EDS", "lb_policy": "RING_HASH", "eds_cluster_config": {"eds_config": {"ads": {}}}}`, ring)
	parse(`{"name": "envoy-only", "type": "EDS", "lb_policy": "MAGLEV", "eds_cluster_config": {"eds_config": {"ads": {}}}}`, envoy)
	parse(`{"cluster_name": "ring", "endpoints": [{"locality": {}, "load_balancing_weight": 1, "lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 1}}}}]}]}`, cla)
	return &Resources{
		Listeners: map[string]*listenerv3.Listener{"greeter": l},
		Routes:    map[string]*routev3.RouteConfiguration{"greeter": rc},
		Clusters:  map[string]*clusterv3.Cluster{"ring": ring, "envoy-only": envoy},
		Endpoints: map[string]*endpointv3.ClusterLoadAssignment{"ring": cla},
	}
}

func explainFor(t *testing.T, res *Resources, url string, c grpcrules.Client) *ClientCheck {
	t.Helper()
	req, err := ParseRequest(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Explain(res, req)
	if err != nil {
		t.Fatal(err)
	}
	check := CheckClient(res, out, c, "--client")
	if check == nil {
		t.Fatal("no check of a gRPC call")
	}
	return check
}

func rules(c *ClientCheck) string {
	var ids []string
	for _, p := range c.Problems {
		ids = append(ids, p.Rule)
	}
	return strings.Join(ids, " ")
}

// grpc-go accepts the redirecting route and fails the RPCs it takes; the
// call that takes it is said to fail, the one that does not is not.
func TestClientCheckGRPCGoFailsTheRPCsARedirectTakes(t *testing.T) {
	res := clientResources(t)
	c := explainFor(t, res, "xds:///greeter/old.Service/Method", grpcrules.Go)
	if c.Passes || rules(c) != "route-action" {
		t.Fatalf("passes %v, rules %q", c.Passes, rules(c))
	}
	if !strings.Contains(c.Call, "grpc-go accepts RouteConfiguration \"greeter\" and fails this RPC") {
		t.Errorf("call: %q", c.Call)
	}
	c = explainFor(t, res, "xds:///greeter/pkg.Service/Method", grpcrules.Go)
	if !strings.Contains(c.Call, "grpc-go takes this RPC as explained") {
		t.Errorf("the forwarded call: %q", c.Call)
	}
}

// grpc-js NACKs the route configuration whole: whatever the call, it runs
// what it last ACKed, not what is explained.
func TestClientCheckGRPCJSNACKsTheRouteConfiguration(t *testing.T) {
	c := explainFor(t, clientResources(t), "xds:///greeter/pkg.Service/Method", grpcrules.JS)
	if c.Passes || rules(c) != "route-action-nack" || c.Problems[0].Effect != string(grpcrules.NACK) {
		t.Fatalf("passes %v, problems %+v", c.Passes, c.Problems)
	}
	if !strings.Contains(c.Call, `grpc-js NACKs RouteConfiguration "greeter"`) || !strings.Contains(c.Call, "last ACKed") {
		t.Errorf("call: %q", c.Call)
	}
}

// C-core serves no RPC over the ring hash cluster the call goes to; the
// Envoy listener's MAGLEV cluster, which no gRPC client fetches, is not
// judged.
func TestClientCheckGRPCCoreFailsOverRingHash(t *testing.T) {
	c := explainFor(t, clientResources(t), "xds:///greeter/pkg.Service/Method", grpcrules.Core)
	if c.Passes || rules(c) != "route-action cluster-ring-hash-core" {
		t.Fatalf("passes %v, rules %q", c.Passes, rules(c))
	}
	if !strings.Contains(c.Call, `grpc-core accepts Cluster "ring" and fails this RPC`) {
		t.Errorf("call: %q", c.Call)
	}
	for _, p := range c.Problems {
		if p.Name == "envoy-only" {
			t.Errorf("a cluster the client never fetches is judged: %+v", p)
		}
	}
}

// What a client accepts passes, and an HTTP request is no client's.
func TestClientCheckPassesWhatTheClientTakes(t *testing.T) {
	res := clientResources(t)
	res.Clusters["ring"].LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	res.Routes["greeter"].VirtualHosts[0].Routes = res.Routes["greeter"].VirtualHosts[0].Routes[1:]
	for _, cl := range grpcrules.All {
		if c := explainFor(t, res, "xds:///greeter/pkg.Service/Method", cl); !c.Passes || len(c.Problems) != 0 {
			t.Errorf("%s: %+v", cl, c)
		}
	}
	out := &Result{Request: Request{Scheme: "http"}}
	if CheckClient(res, out, grpcrules.Go, "--client") != nil {
		t.Error("an HTTP request checked for a gRPC client")
	}
}
