package translate

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	pickfirstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/pick_first/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/model"
)

// grpcLBPolicies are the service LB policies written as a Cluster's
// load_balancing_policy (gRFC A52), which proxyless gRPC clients read in
// place of lb_policy: pick_first (A62) sends every RPC to the first
// endpoint that connects, in the assignment's order; wrr_locality picks a
// locality by its weight, then round robin within it.
var grpcLBPolicies = map[string]func(*model.Service) *clusterv3.LoadBalancingPolicy{
	"pick_first": func(*model.Service) *clusterv3.LoadBalancingPolicy {
		return lbPolicy("envoy.load_balancing_policies.pick_first", &pickfirstv3.PickFirst{})
	},
	"wrr_locality": func(*model.Service) *clusterv3.LoadBalancingPolicy {
		return lbPolicy("envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{
			EndpointPickingPolicy: lbPolicy("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{}),
		})
	},
	// weighted_round_robin (A58) picks a locality by its weight, as
	// lb_policy ROUND_ROBIN does, then an endpoint by its reported load.
	"weighted_round_robin": func(s *model.Service) *clusterv3.LoadBalancingPolicy {
		return lbPolicy("envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{
			EndpointPickingPolicy: lbPolicy("envoy.load_balancing_policies.client_side_weighted_round_robin", weightedRoundRobin(s.WRR)),
		})
	},
}

// weightedRoundRobin writes the knobs set; the clients default the rest.
func weightedRoundRobin(w *model.WeightedRoundRobin) *cswrrv3.ClientSideWeightedRoundRobin {
	out := &cswrrv3.ClientSideWeightedRoundRobin{}
	if w == nil {
		return out
	}
	out.BlackoutPeriod = optDur(w.BlackoutPeriod)
	out.WeightExpirationPeriod = optDur(w.WeightExpirationPeriod)
	out.WeightUpdatePeriod = optDur(w.WeightUpdatePeriod)
	if p := w.ErrorUtilizationPenalty; p != nil {
		out.ErrorUtilizationPenalty = wrapperspb.Float(float32(*p))
	}
	return out
}

// GRPCOnlyLBPolicies are the LB policies a service may name only when
// proxyless gRPC clients are its callers: Envoy's clusters balance by
// lb_policy.
func GRPCOnlyLBPolicies() []string {
	return []string{"pick_first", "weighted_round_robin", "wrr_locality"}
}

// lbPolicy is a load_balancing_policy of one policy: a client that does
// not implement it NACKs the Cluster rather than fall back to another
// silently.
func lbPolicy(name string, cfg proto.Message) *clusterv3.LoadBalancingPolicy {
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: name, TypedConfig: pack(cfg)},
	}}}
}
