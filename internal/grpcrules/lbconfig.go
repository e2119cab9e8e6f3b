package grpcrules

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
)

// The load_balancing_policy types gRPC clients know (gRFC A52).
const (
	lbRoundRobin = "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin"
	lbRingHash   = "type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash"
	lbPickFirst  = "type.googleapis.com/envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst"
	lbWRRLocal   = "type.googleapis.com/envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality"
	lbLeastReq   = "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest"
	lbCSWRR      = "type.googleapis.com/envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin"
)

// lbConfigs are the load_balancing_policy types each client implements at
// the version in Versions: grpc-go's xdslbregistry; grpc-js-xds 1.14's
// registry, whose pick_first and weighted round robin need
// GRPC_EXPERIMENTAL_PICKFIRST_LB_CONFIG and GRPC_EXPERIMENTAL_XDS_WRR_LB,
// and which has no ring hash here (only as lb_policy). C-core 1.51.1
// ignores load_balancing_policy (custom LB configs were behind
// GRPC_EXPERIMENTAL_XDS_CUSTOM_LB_CONFIG then): see lbConfigCore.
var lbConfigs = map[Client][]string{
	Go: {lbRoundRobin, lbRingHash, lbPickFirst, lbWRRLocal, lbLeastReq, lbCSWRR},
	JS: {lbRoundRobin, lbWRRLocal},
}

// lbConfig checks a load_balancing_policy: each client uses the first
// policy in the list it implements, and NACKs the Cluster when it
// implements none; a wrr_locality it picks has a child list of its own.
func (c *checker) lbConfig(field string, p *clusterv3.LoadBalancingPolicy, lbPolicy clusterv3.Cluster_LbPolicy) {
	lacking := map[string][]Client{} // the list's field: who finds nothing in it
	var order []string
	for _, cl := range []Client{Go, JS} {
		if f := missingPolicy(field, p, lbConfigs[cl], 0); f != "" {
			if _, seen := lacking[f]; !seen {
				order = append(order, f)
			}
			lacking[f] = append(lacking[f], cl)
		}
	}
	for _, f := range order {
		c.add("cluster-lb-config", lacking[f], f, "no policy in the list is one they implement (%s); they NACK the whole CDS response", policyNames(p))
	}
	c.lbConfigCore(field, p, lbPolicy)
}

// lbConfigCore: C-core 1.51.1 balances by lb_policy whatever
// load_balancing_policy says (test/interop saw pick_first served round
// robin), which is harmless only where the two agree: round robin, alone
// or under wrr_locality, with lb_policy ROUND_ROBIN.
func (c *checker) lbConfigCore(field string, p *clusterv3.LoadBalancingPolicy, lbPolicy clusterv3.Cluster_LbPolicy) {
	first := p.GetPolicies()
	if len(first) > 0 && lbPolicy == clusterv3.Cluster_ROUND_ROBIN {
		switch tc := first[0].GetTypedExtensionConfig().GetTypedConfig(); tc.GetTypeUrl() {
		case lbRoundRobin:
			return
		case lbWRRLocal:
			w := &wrrlocalityv3.WrrLocality{}
			if tc.UnmarshalTo(w) == nil && len(w.GetEndpointPickingPolicy().GetPolicies()) > 0 &&
				w.GetEndpointPickingPolicy().GetPolicies()[0].GetTypedExtensionConfig().GetTypedConfig().GetTypeUrl() == lbRoundRobin {
				return
			}
		}
	}
	c.add("cluster-lb-config-core", nil, field, "C-core 1.51.1 ignores load_balancing_policy (%s) and balances by lb_policy %s instead", policyNames(p), lbPolicy)
}

// missingPolicy is the field of the first list in which a client with
// implemented finds no policy, or "".
func missingPolicy(field string, p *clusterv3.LoadBalancingPolicy, implemented []string, depth int) string {
	for i, pol := range p.GetPolicies() {
		url := pol.GetTypedExtensionConfig().GetTypedConfig().GetTypeUrl()
		if !slices.Contains(implemented, url) {
			continue
		}
		if url != lbWRRLocal || depth > 8 {
			return ""
		}
		w := &wrrlocalityv3.WrrLocality{}
		if pol.GetTypedExtensionConfig().GetTypedConfig().UnmarshalTo(w) != nil {
			return fmt.Sprintf("%s.policies[%d]", field, i)
		}
		return missingPolicy(fmt.Sprintf("%s.policies[%d].typed_extension_config.typed_config.endpoint_picking_policy", field, i), w.GetEndpointPickingPolicy(), implemented, depth+1)
	}
	return field
}

// policyNames lists a policy list's types by their short names.
func policyNames(p *clusterv3.LoadBalancingPolicy) string {
	var names []string
	for _, pol := range p.GetPolicies() {
		url := pol.GetTypedExtensionConfig().GetTypedConfig().GetTypeUrl()
		names = append(names, url[strings.LastIndexByte(url, '/')+1:])
	}
	return strings.Join(names, ", ")
}
