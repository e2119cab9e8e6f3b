package xdstest

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Snapshot builds a validated snapshot of msgs (proto messages, or slices of
// them) plus the probe Runtime resource. It fails the test if Build refuses.
func Snapshot(t testing.TB, reg *xdstype.Registry, msgs ...any) *snapshot.Snapshot {
	t.Helper()
	inputs := []xdstype.Resource{input(t, reg, Runtime(ProbeName, "probe", 1))}
	for _, m := range msgs {
		switch v := m.(type) {
		case TTL:
			in := input(t, reg, v.Message)
			in.TTL = v.TTL
			inputs = append(inputs, in)
		case proto.Message:
			inputs = append(inputs, input(t, reg, v))
		case []proto.Message:
			for _, x := range v {
				inputs = append(inputs, input(t, reg, x))
			}
		default:
			t.Fatalf("Snapshot: %T is not a proto message", m)
		}
	}
	snap, err := snapshot.Build(reg, inputs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return snap
}

// TTL puts Message in a snapshot with a TTL.
type TTL struct {
	Message proto.Message
	TTL     time.Duration
}

func input(t testing.TB, reg *xdstype.Registry, m proto.Message) xdstype.Resource {
	url := "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
	typ := reg.Lookup(url)
	if typ == nil {
		t.Fatalf("no registered type for %s", url)
	}
	return xdstype.Resource{Type: typ, Name: xdstype.NameOf(m), Message: m}
}

// ADS is the config source of resources fetched over the aggregated stream.
func ADS() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// Cluster is an EDS cluster whose endpoints come over ADS.
func Cluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ADS()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

// Endpoints is the load assignment of cluster with one locality holding the
// given ports on 127.0.0.1.
func Endpoints(cluster string, ports ...uint32) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for _, p := range ports {
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p},
				}}},
			}},
		})
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "test"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints:         lbs,
		}},
	}
}

// Route is a route configuration sending everything to cluster.
func Route(name, cluster string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}},
		}},
	}
}

// HCM is an HTTP connection manager using the route configuration route
// over ADS and ending with the router, as both Envoy and gRPC require.
func HCM(route string) *anypb.Any {
	router, _ := anypb.New(&routerv3.Router{})
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    ADS(),
			RouteConfigName: route,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	return hcm
}

// APIListener is a listener for proxyless gRPC: an API listener whose HTTP
// connection manager uses route over ADS.
func APIListener(name, route string) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: HCM(route)},
	}
}

// Runtime is a runtime layer with one numeric key.
func Runtime(name, key string, value float64) *runtimev3.Runtime {
	return &runtimev3.Runtime{Name: name, Layer: &structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewNumberValue(value)}}}
}
