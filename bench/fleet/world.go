package main

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// world is the config both servers serve: clusters EDS clusters of 10
// endpoints, one listener and one route table naming them. gen moves one
// endpoint of cluster 0 (an EDS change); routeGen changes the route table.
type world struct {
	clusters, listeners, routes, endpoints []proto.Message
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func clusterName(i int) string { return fmt.Sprintf("service-%04d", i) }

func makeWorld(n, gen, routeGen int) world {
	var w world
	vh := &routev3.VirtualHost{Name: "all", Domains: []string{"*"}}
	for i := range n {
		name := clusterName(i)
		w.clusters = append(w.clusters, &clusterv3.Cluster{
			Name:                 name,
			ConnectTimeout:       durationpb.New(time.Second),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
		})
		var lbs []*endpointv3.LbEndpoint
		for j := range 10 {
			port := uint32(8000 + j)
			if i == 0 && j == 0 {
				port += uint32(gen)
			}
			lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
				}}},
			}}})
		}
		w.endpoints = append(w.endpoints, &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality: &corev3.Locality{Region: "r1"}, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: lbs,
		}}})
		vh.Routes = append(vh.Routes, &routev3.Route{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: fmt.Sprintf("/%s/%d", name, routeGen)}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}},
		})
	}
	w.routes = []proto.Message{&routev3.RouteConfiguration{Name: "main", VirtualHosts: []*routev3.VirtualHost{vh}}}
	router, _ := anypb.New(&routerv3.Router{})
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: ads(), RouteConfigName: "main"}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	w.listeners = []proto.Message{&listenerv3.Listener{
		Name: "ingress",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 10000},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}},
	}}
	return w
}
