package snapshot_test

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// fleetInputs is n EDS clusters, each with an assignment of 10 endpoints.
func fleetInputs(reg *xdstype.Registry, n int) []xdstype.Resource {
	var in []xdstype.Resource
	for i := range n {
		name := fmt.Sprintf("service-%04d", i)
		c := &clusterv3.Cluster{
			Name:                 name,
			ConnectTimeout:       durationpb.New(time.Second),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			}},
		}
		var lbs []*endpointv3.LbEndpoint
		for j := range 10 {
			lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
			}}})
		}
		cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality: &corev3.Locality{Region: "r1", Zone: "z1"}, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: lbs,
		}}}
		in = append(in,
			xdstype.Resource{Type: reg.Lookup(xdstype.ClusterURL), Name: name, Message: c},
			xdstype.Resource{Type: reg.Lookup(xdstype.EndpointURL), Name: name, Message: cla})
	}
	return in
}

// BenchmarkBuild1000Clusters measures publishing's CPU side: validating,
// reference-checking, marshalling and hashing 1,000 clusters and their
// 1,000 assignments of 10 endpoints.
func BenchmarkBuild1000Clusters(b *testing.B) {
	reg := xdstype.New()
	in := fleetInputs(reg, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snapshot.Build(reg, in); err != nil {
			b.Fatal(err)
		}
	}
}
