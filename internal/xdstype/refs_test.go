package xdstype_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var (
	ads      = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	fromFile = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/envoy/rds.yaml"}}}
)

func routeTo(cluster string) *routev3.Route {
	return &routev3.Route{Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}}}
}

func weighted(names ...string) *routev3.Route {
	wc := &routev3.WeightedCluster{}
	for _, n := range names {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: n})
	}
	return &routev3.Route{Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier:      &routev3.RouteAction_WeightedClusters{WeightedClusters: wc},
		RequestMirrorPolicies: []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "shadow"}},
	}}}
}

func sds(name string, cs *corev3.ConfigSource) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: cs}
}

func tlsContext(cert, ca string) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds(cert, ads), sds("bootstrap-static", nil)},
		ValidationContextType:          &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{ValidationContextSdsSecretConfig: sds(ca, ads)},
	}
}

const (
	faultURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
)

// discovered is a config_discovery from Pylon accepting the fault filter.
func discovered(t *testing.T, dflt, withoutWarming bool) *corev3.ExtensionConfigSource {
	cd := &corev3.ExtensionConfigSource{ConfigSource: ads, TypeUrls: []string{faultURL}, ApplyDefaultConfigWithoutWarming: withoutWarming}
	if dflt {
		cd.DefaultConfig = anyOf(t, &faultv3.HTTPFault{})
	}
	return cd
}

func httpFilter(name string, cd *corev3.ExtensionConfigSource) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: cd}}
}

func ecdsRef(name, path string, optional bool) xdstype.Ref {
	return xdstype.Ref{TypeURL: xdstype.ExtensionConfURL, Name: name, Field: path + ".name",
		Accept: []string{faultURL}, AcceptField: path + ".config_discovery.type_urls", Optional: optional}
}

func hcm(t *testing.T, h *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyOf(t, h)}}
}

// The references a resource makes are what must exist before it is
// published and what make-before-break orders by; each names the field an
// error will point at.
func TestRefs(t *testing.T) {
	reg := xdstype.New()
	cases := []struct {
		name string
		msg  proto.Message
		want []xdstype.Ref
	}{{
		name: "listener: RDS, inline routes, TCP proxy, downstream TLS, a file source",
		msg: &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{
			{Filters: []*listenerv3.Filter{hcm(t, &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r1", ConfigSource: ads}}})},
				TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: anyOf(t, &tlsv3.DownstreamTlsContext{CommonTlsContext: tlsContext("server-cert", "client-ca")})}}},
			{Filters: []*listenerv3.Filter{hcm(t, &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
				VirtualHosts: []*routev3.VirtualHost{{Routes: []*routev3.Route{{}, routeTo("inline")}}}}}})}},
			{Filters: []*listenerv3.Filter{hcm(t, &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "on-disk", ConfigSource: fromFile}}})}},
		}, DefaultFilterChain: &listenerv3.FilterChain{Filters: []*listenerv3.Filter{{Name: "tcp", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: anyOf(t, &tcpproxyv3.TcpProxy{ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{
			Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "t1"}, {Name: "t2"}}}}})}}}}},
		want: []xdstype.Ref{
			{TypeURL: xdstype.RouteURL, Name: "r1", Field: "filter_chains[0].filters[0].typed_config.rds.route_config_name"},
			{TypeURL: xdstype.SecretURL, Name: "server-cert", Field: "filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0]"},
			{TypeURL: xdstype.SecretURL, Name: "client-ca", Field: "filter_chains[0].transport_socket.typed_config.common_tls_context.validation_context_sds_secret_config"},
			{TypeURL: xdstype.ClusterURL, Name: "inline", Field: "filter_chains[1].filters[0].typed_config.route_config.virtual_hosts[0].routes[1].route.cluster"},
			{TypeURL: xdstype.ClusterURL, Name: "t1", Field: "default_filter_chain.filters[0].typed_config.weighted_clusters.clusters[0].name"},
			{TypeURL: xdstype.ClusterURL, Name: "t2", Field: "default_filter_chain.filters[0].typed_config.weighted_clusters.clusters[1].name"},
		},
	}, {
		name: "listener: ECDS listener, network and HTTP filters (router's upstream filters too), scoped routes",
		msg: &listenerv3.Listener{Name: "l",
			ListenerFilters: []*listenerv3.ListenerFilter{{Name: "lf", ConfigType: &listenerv3.ListenerFilter_ConfigDiscovery{ConfigDiscovery: discovered(t, false, false)}}},
			FilterChains: []*listenerv3.FilterChain{
				{Filters: []*listenerv3.Filter{
					{Name: "nf", ConfigType: &listenerv3.Filter_ConfigDiscovery{ConfigDiscovery: discovered(t, false, false)}},
					hcm(t, &hcmv3.HttpConnectionManager{
						RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r1", ConfigSource: ads}},
						HttpFilters: []*hcmv3.HttpFilter{
							httpFilter("warm", discovered(t, true, false)),
							httpFilter("unwarmed", discovered(t, true, true)),
							httpFilter("on-disk", &corev3.ExtensionConfigSource{ConfigSource: fromFile, TypeUrls: []string{faultURL}}),
							{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{
								UpstreamHttpFilters: []*hcmv3.HttpFilter{httpFilter("up", discovered(t, false, false))}})}},
						}})}},
				{Filters: []*listenerv3.Filter{hcm(t, &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
					RdsConfigSource: ads,
					ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRouteConfigurationsList{ScopedRouteConfigurationsList: &hcmv3.ScopedRouteConfigurationsList{
						ScopedRouteConfigurations: []*routev3.ScopedRouteConfiguration{{Name: "s", RouteConfigurationName: "scoped-r"}}}}}}})}},
				{Filters: []*listenerv3.Filter{hcm(t, &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
					RdsConfigSource: ads,
					ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: ads}}}}})}},
			}},
		want: []xdstype.Ref{
			ecdsRef("lf", "listener_filters[0]", false),
			ecdsRef("nf", "filter_chains[0].filters[0]", false),
			{TypeURL: xdstype.RouteURL, Name: "r1", Field: "filter_chains[0].filters[1].typed_config.rds.route_config_name"},
			ecdsRef("warm", "filter_chains[0].filters[1].typed_config.http_filters[0]", false),
			ecdsRef("unwarmed", "filter_chains[0].filters[1].typed_config.http_filters[1]", true),
			ecdsRef("up", "filter_chains[0].filters[1].typed_config.http_filters[3].typed_config.upstream_http_filters[0]", false),
			{TypeURL: xdstype.RouteURL, Name: "scoped-r", Field: "filter_chains[1].filters[0].typed_config.scoped_routes.scoped_route_configurations_list.scoped_route_configurations[0].route_configuration_name"},
		},
	}, {
		name: "cluster: ECDS upstream network and upstream HTTP filters",
		msg: &clusterv3.Cluster{Name: "c",
			Filters: []*clusterv3.Filter{{Name: "unf", ConfigDiscovery: discovered(t, false, false)}},
			TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": anyOf(t, &upstreamhttpv3.HttpProtocolOptions{
				HttpFilters: []*hcmv3.HttpFilter{httpFilter("uhf", discovered(t, false, false))}})}},
		want: []xdstype.Ref{
			ecdsRef("unf", "filters[0]", false),
			ecdsRef("uhf", "typed_extension_protocol_options[envoy.extensions.upstreams.http.v3.HttpProtocolOptions].http_filters[0]", false),
		},
	}, {
		name: "gRPC API listener",
		msg: &listenerv3.Listener{Name: "svc", ApiListener: &listenerv3.ApiListener{ApiListener: anyOf(t, &hcmv3.HttpConnectionManager{
			RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "svc-routes", ConfigSource: ads}}})}},
		want: []xdstype.Ref{{TypeURL: xdstype.RouteURL, Name: "svc-routes", Field: "api_listener.api_listener.rds.route_config_name"}},
	}, {
		name: "route configuration: cluster, weighted clusters, mirror",
		msg: &routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{
			{Routes: []*routev3.Route{routeTo("a")}},
			{Routes: []*routev3.Route{{Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{}}}, weighted("b", "c")}},
		}},
		want: []xdstype.Ref{
			{TypeURL: xdstype.ClusterURL, Name: "a", Field: "virtual_hosts[0].routes[0].route.cluster"},
			{TypeURL: xdstype.ClusterURL, Name: "b", Field: "virtual_hosts[1].routes[1].route.weighted_clusters.clusters[0].name"},
			{TypeURL: xdstype.ClusterURL, Name: "c", Field: "virtual_hosts[1].routes[1].route.weighted_clusters.clusters[1].name"},
			{TypeURL: xdstype.ClusterURL, Name: "shadow", Field: "virtual_hosts[1].routes[1].route.request_mirror_policies[0].cluster"},
		},
	}, {
		name: "virtual host (VHDS)",
		msg:  &routev3.VirtualHost{Name: "vh", Routes: []*routev3.Route{routeTo("a")}},
		want: []xdstype.Ref{{TypeURL: xdstype.ClusterURL, Name: "a", Field: "routes[0].route.cluster"}},
	}, {
		name: "scoped route",
		msg:  &routev3.ScopedRouteConfiguration{Name: "s", RouteConfigurationName: "r"},
		want: []xdstype.Ref{{TypeURL: xdstype.RouteURL, Name: "r", Field: "route_configuration_name"}},
	}, {
		name: "scoped route with its route configuration inline",
		msg: &routev3.ScopedRouteConfiguration{Name: "s", RouteConfiguration: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{Routes: []*routev3.Route{routeTo("a")}}}}},
		want: []xdstype.Ref{{TypeURL: xdstype.ClusterURL, Name: "a", Field: "route_configuration.virtual_hosts[0].routes[0].route.cluster"}},
	}, {
		name: "EDS cluster by its own name, upstream TLS and transport socket matches",
		msg: &clusterv3.Cluster{Name: "a", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:       &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
			TransportSocket:        &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: anyOf(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: tlsContext("client-cert", "server-ca")})}},
			TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{{Name: "m", TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: anyOf(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: tlsContext("m-cert", "m-ca")})}}}},
		},
		want: []xdstype.Ref{
			{TypeURL: xdstype.EndpointURL, Name: "a", Field: "name"},
			{TypeURL: xdstype.SecretURL, Name: "client-cert", Field: "transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0]"},
			{TypeURL: xdstype.SecretURL, Name: "server-ca", Field: "transport_socket.typed_config.common_tls_context.validation_context_sds_secret_config"},
			{TypeURL: xdstype.SecretURL, Name: "m-cert", Field: "transport_socket_matches[0].transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0]"},
			{TypeURL: xdstype.SecretURL, Name: "m-ca", Field: "transport_socket_matches[0].transport_socket.typed_config.common_tls_context.validation_context_sds_secret_config"},
		},
	}, {
		name: "EDS cluster by service name",
		msg: &clusterv3.Cluster{Name: "a", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads, ServiceName: "a-endpoints"}},
		want: []xdstype.Ref{{TypeURL: xdstype.EndpointURL, Name: "a-endpoints", Field: "eds_cluster_config.service_name"}},
	}, {
		name: "clusters that fetch nothing from Pylon",
		msg: &clusterv3.Cluster{Name: "static", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads}},
	}, {
		name: "EDS from a file on the proxy",
		msg: &clusterv3.Cluster{Name: "f", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: fromFile}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ := reg.Lookup("type.googleapis.com/" + string(c.msg.ProtoReflect().Descriptor().FullName()))
			if typ == nil || typ.Refs == nil {
				t.Fatalf("no Refs for %T", c.msg)
			}
			if diff := cmp.Diff(c.want, typ.Refs(c.msg)); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
		})
	}
}
