package translate

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
)

// grpcLBPolicies are the service LB policies written as a Cluster's
// load_balancing_policy (gRFC A52), which proxyless gRPC clients read in
// place of lb_policy: pick_first (A62) sends every RPC to the first
// endpoint that connects, in the assignment's order; wrr_locality picks a
// locality by its weight, then round robin within it.
var grpcLBPolicies = map[string]func() *clusterv3.LoadBalancingPolicy{
	"pick_first": func() *clusterv3.LoadBalancingPolicy {
		return lbPolicy("envoy.load_balancing_policies.pick_first", &pickfirstv3.PickFirst{})
	},
	"wrr_locality": func() *clusterv3.LoadBalancingPolicy {
		return lbPolicy("envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{
			EndpointPickingPolicy: lbPolicy("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{}),
		})
	},
}

// GRPCOnlyLBPolicies are the LB policies a service may name only when
// proxyless gRPC clients are its callers: Envoy's clusters balance by
// lb_policy.
func GRPCOnlyLBPolicies() []string { return []string{"pick_first", "wrr_locality"} }

// lbPolicy is a load_balancing_policy of one policy: a client that does
// not implement it NACKs the Cluster rather than fall back to another
// silently.
func lbPolicy(name string, cfg proto.Message) *clusterv3.LoadBalancingPolicy {
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: name, TypedConfig: pack(cfg)},
	}}}
}
