package route

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func lbEndpoint(port uint32, h corev3.HealthStatus) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HealthStatus: h, HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}
}

// Serving endpoints: the lowest priority with a healthy (or unknown) one;
// for gRPC a locality without a weight is dropped, so a priority holding
// only such localities does not serve.
func TestEndpointsServing(t *testing.T) {
	cla := &endpointv3.ClusterLoadAssignment{Endpoints: []*endpointv3.LocalityLbEndpoints{
		{Priority: 0, LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(1, corev3.HealthStatus_HEALTHY)}},
		{Priority: 0, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(2, corev3.HealthStatus_UNHEALTHY)}},
		{Priority: 1, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(3, corev3.HealthStatus_UNKNOWN), lbEndpoint(4, corev3.HealthStatus_DRAINING)}},
	}}
	serving := func(eps []Endpoint) map[string]bool {
		out := map[string]bool{}
		for _, e := range eps {
			if e.Serving {
				out[e.Address] = true
			}
		}
		return out
	}
	eps, p := endpoints(cla, false)
	if got := serving(eps); p != 0 || len(got) != 1 || !got["10.0.0.1:1"] {
		t.Errorf("Envoy: priority %d, serving %v", p, got)
	}
	eps, p = endpoints(cla, true)
	if got := serving(eps); p != 1 || len(got) != 1 || !got["10.0.0.1:3"] {
		t.Errorf("gRPC: priority %d, serving %v", p, got)
	}
	if _, p := endpoints(nil, false); p != -1 {
		t.Errorf("no assignment: priority %d", p)
	}
}
