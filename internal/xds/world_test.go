package xds

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// The snapshots the stream shell's internal tests serve, and the first
// responses the protocol core plans for a stream: what the shell sends,
// without a stream. (The protocol core's own tests have the same world.)

// world is n EDS clusters with one-endpoint assignments (the port of
// cluster i is base+i) and a route "main" to route.
func world(t *testing.T, reg *xdstype.Registry, n int, base uint32, route string) *snapshot.Snapshot {
	t.Helper()
	ads := &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	var inputs []xdstype.Resource
	add := func(url string, m proto.Message) {
		inputs = append(inputs, xdstype.Resource{Type: reg.Lookup(url), Name: xdstype.NameOf(m), Message: m})
	}
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		add(xdstype.ClusterURL, &clusterv3.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
		})
		add(xdstype.EndpointURL, &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: base + uint32(i)},
					}}},
				}},
			}}}},
		})
	}
	add(xdstype.RouteURL, &routev3.RouteConfiguration{Name: "main", VirtualHosts: []*routev3.VirtualHost{{
		Name: "all", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: route}}},
		}},
	}}})
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// firstSotW is the first response a state-of-the-world stream of srv
// requesting typeURL (every resource, or names) is owed for snap, planned
// as the stream would and with nonce "1"; nil when it is owed none.
func firstSotW(srv *Server, snap *snapshot.Snapshot, typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	w := protocol.NewWatch(srv.opts.Registry.Lookup(typeURL), srv.share)
	if _, owe := w.OnRequest(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names}, snap); !owe {
		return nil
	}
	p := protocol.NewPlanner(soleType(&w), &srv.plan, time.Now(), time.Time{})
	o, _ := w.Plan(&p, snap.Set(typeURL))
	return w.Response(o, "1", false)
}

// firstDelta is what the first response of a delta stream of srv
// subscribing to subscribe of typeURL carries for snap, planned as the
// stream would.
func firstDelta(srv *Server, snap *snapshot.Snapshot, typeURL string, subscribe ...string) protocol.DeltaPlan {
	w := protocol.NewDeltaWatch(srv.opts.Registry.Lookup(typeURL), srv.share)
	set := snap.Set(typeURL)
	w.Subscribe(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: subscribe}, set)
	p := protocol.NewPlanner(soleType(&w), &srv.plan, time.Now(), time.Time{})
	return w.Plan(&p, set, true, false)
}

// soleType is what the planner of a stream with only h's type sees.
func soleType(h interface {
	protocol.Holdings
	State() *protocol.TypeState
}) protocol.HoldView {
	url := h.State().Type.URL
	return func(typeURL string) protocol.Holdings {
		if typeURL == url && h.State().Started {
			return h
		}
		return nil
	}
}
