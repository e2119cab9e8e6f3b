package snapshot_test

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name, ConnectTimeout: durationpb.New(1e9),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
	}
}

func staticCluster(name string, cla *endpointv3.ClusterLoadAssignment) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: name, ConnectTimeout: durationpb.New(1e9),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment:       cla,
	}
}

func cla(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	c := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	if len(addrs) == 0 {
		return c
	}
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: a, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}},
		}}})
	}
	c.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return c
}

// A route to a cluster whose endpoint set is empty (an EDS cluster whose
// ClusterLoadAssignment has no endpoints, a static cluster whose
// load_assignment has none) is a warning naming the file, line, route
// configuration and the route's field, and the endpoints' place; a route
// to a cluster with endpoints is not.
func TestRouteToClusterWithoutEndpointsWarns(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "routes", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/full"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "full"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/eds"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "empty-eds"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
					Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "full", Weight: wrapperspb.UInt32(50)}, {Name: "empty-static", Weight: wrapperspb.UInt32(50)}},
				}}}}},
		},
	}}}
	reg := xdstype.New()
	inputs := typedInputs(t, reg, rc, staticCluster("full", cla("full", "10.0.0.1")), edsCluster("empty-eds"), cla("empty-eds"), staticCluster("empty-static", cla("empty-static")))
	s, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatalf("a route to a cluster without endpoints is refused, want a warning: %v", err)
	}
	where := func(typeURL, name string) *xdstype.Resource {
		for i := range inputs {
			if inputs[i].Type.URL == typeURL && inputs[i].Name == name {
				return &inputs[i]
			}
		}
		return nil
	}
	got := snapshot.EmptyEndpointRoutes(s, where)
	if len(got) != 2 {
		t.Fatalf("%d warnings, want 2 (the EDS and the static cluster):\n%v", len(got), got)
	}
	for i, want := range []struct{ field, cluster, endpoints string }{
		{"virtual_hosts[0].routes[1].route.cluster", `Cluster "empty-eds"`, `ClusterLoadAssignment "empty-eds" (a.yaml:4)`},
		{"virtual_hosts[0].routes[2].route.weighted_clusters.clusters[1].name", `Cluster "empty-static"`, "its load_assignment (a.yaml:5)"},
	} {
		d := got[i]
		if d.File != "a.yaml" || d.Line != 1 || d.Type != "RouteConfiguration" || d.Name != "routes" || d.Field != want.field {
			t.Errorf("warning %d at %s:%d %s %q %s, want a.yaml:1 RouteConfiguration \"routes\" %s", i, d.File, d.Line, d.Type, d.Name, d.Field, want.field)
		}
		if !strings.Contains(d.Message, want.cluster) || !strings.Contains(d.Message, want.endpoints) {
			t.Errorf("warning %d: %q does not name %s and %s", i, d.Message, want.cluster, want.endpoints)
		}
	}
}

// An EmptyEndpointsMemo kept across builds through one Validated warns as
// EmptyEndpointRoutes without one, build after build: when a cluster's
// endpoints come and go (a new endpoints set), when only a route changes
// (the clusters' and endpoints' sets are the last build's, and the memo's
// answer is taken), and when a cluster goes.
func TestEmptyEndpointsMemoWarnsAsWithout(t *testing.T) {
	reg := xdstype.New()
	route := func(prefix string, clusters ...string) *routev3.RouteConfiguration {
		rc := &routev3.RouteConfiguration{Name: "routes", VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}}}}
		for _, c := range clusters {
			rc.VirtualHosts[0].Routes = append(rc.VirtualHosts[0].Routes, &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix + c}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c}}}})
		}
		return rc
	}
	steps := []struct {
		what  string
		msgs  []proto.Message
		warns int
	}{
		{"a's endpoints empty", []proto.Message{route("/", "a", "b"), edsCluster("a"), cla("a"), edsCluster("b"), cla("b", "10.0.0.2")}, 1},
		{"a's endpoints come", []proto.Message{route("/", "a", "b"), edsCluster("a"), cla("a", "10.0.0.1"), edsCluster("b"), cla("b", "10.0.0.2")}, 0},
		{"a's endpoints go", []proto.Message{route("/", "a", "b"), edsCluster("a"), cla("a"), edsCluster("b"), cla("b", "10.0.0.2")}, 1},
		{"only the route changed", []proto.Message{route("/v2/", "a", "b"), edsCluster("a"), cla("a"), edsCluster("b"), cla("b", "10.0.0.2")}, 1},
		{"b's endpoints go too", []proto.Message{route("/v2/", "a", "b"), edsCluster("a"), cla("a"), edsCluster("b"), cla("b")}, 2},
		{"a static cluster in a's place", []proto.Message{route("/v2/", "a", "b"), staticCluster("a", cla("a", "10.0.0.1")), edsCluster("b"), cla("b")}, 1},
	}
	var v snapshot.Validated
	var memo snapshot.EmptyEndpointsMemo
	// The messages of a step that are equal to the last's are the last's,
	// as a compile hands a build the messages it kept.
	var last []xdstype.Resource
	for _, s := range steps {
		inputs := typedInputs(t, reg, s.msgs...)
		for i := range inputs {
			for _, l := range last {
				if l.Type == inputs[i].Type && l.Name == inputs[i].Name && proto.Equal(l.Message, inputs[i].Message) {
					inputs[i].Message = l.Message
				}
			}
		}
		last = inputs
		snap, err := snapshot.BuildValidated(reg, inputs, &v)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		where := func(string, string) *xdstype.Resource { return nil }
		got, want := memo.Routes(snap, where), snapshot.EmptyEndpointRoutes(snap, where)
		if d := cmp.Diff(want, got); d != "" || len(got) != s.warns {
			t.Fatalf("%s: %d warnings through the memo, want %d; (-without +with):\n%s", s.what, len(got), s.warns, d)
		}
	}
}
