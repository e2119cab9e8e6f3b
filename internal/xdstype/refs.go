package xdstype

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// servedHere reports whether a config source points at an xDS server (Pylon)
// rather than at a file on the proxy. Only the former must be consistent with
// what Pylon serves.
func servedHere(cs *corev3.ConfigSource) bool {
	if cs == nil {
		return true
	}
	//lint:ignore SA1019 deprecated in the API, still accepted by Envoy: a file on the proxy either way
	return cs.GetPath() == "" && cs.GetPathConfigSource() == nil
}

// unpack decodes a typed_config into its message, or returns nil when the Any
// is absent or of another type.
func unpack[T proto.Message](a *anypb.Any, m T) (T, bool) {
	var zero T
	if a == nil || !a.MessageIs(m) {
		return zero, false
	}
	if err := a.UnmarshalTo(m); err != nil {
		return zero, false
	}
	return m, true
}

func listenerRefs(m proto.Message) []Ref {
	l := m.(*listenerv3.Listener)
	var refs []Ref
	chain := func(path string, fc *listenerv3.FilterChain) {
		if fc == nil {
			return
		}
		for j, f := range fc.GetFilters() {
			refs = append(refs, networkFilterRefs(fmt.Sprintf("%s.filters[%d].typed_config", path, j), f.GetTypedConfig())...)
		}
		if ts := fc.GetTransportSocket(); ts != nil {
			if tc, ok := unpack(ts.GetTypedConfig(), &tlsv3.DownstreamTlsContext{}); ok {
				refs = append(refs, tlsRefs(path+".transport_socket.typed_config.common_tls_context", tc.GetCommonTlsContext())...)
			}
		}
	}
	for i, fc := range l.GetFilterChains() {
		chain(fmt.Sprintf("filter_chains[%d]", i), fc)
	}
	chain("default_filter_chain", l.GetDefaultFilterChain())
	if api := l.GetApiListener(); api != nil {
		refs = append(refs, networkFilterRefs("api_listener.api_listener", api.GetApiListener())...)
	}
	return refs
}

// networkFilterRefs follows the network filters that name other resources:
// the HTTP connection manager (routes) and the TCP proxy (clusters).
func networkFilterRefs(path string, cfg *anypb.Any) []Ref {
	if hcm, ok := unpack(cfg, &hcmv3.HttpConnectionManager{}); ok {
		if rds := hcm.GetRds(); rds != nil && servedHere(rds.GetConfigSource()) {
			return []Ref{{TypeURL: RouteURL, Name: rds.GetRouteConfigName(), Field: path + ".rds.route_config_name"}}
		}
		if rc := hcm.GetRouteConfig(); rc != nil {
			return virtualHostsRefs(path+".route_config", rc.GetVirtualHosts())
		}
		return nil
	}
	if tp, ok := unpack(cfg, &tcpproxyv3.TcpProxy{}); ok {
		if c := tp.GetCluster(); c != "" {
			return []Ref{{TypeURL: ClusterURL, Name: c, Field: path + ".cluster"}}
		}
		var refs []Ref
		for k, wc := range tp.GetWeightedClusters().GetClusters() {
			refs = append(refs, Ref{TypeURL: ClusterURL, Name: wc.GetName(), Field: fmt.Sprintf("%s.weighted_clusters.clusters[%d].name", path, k)})
		}
		return refs
	}
	return nil
}

func routeConfigRefs(m proto.Message) []Ref {
	return virtualHostsRefs("", m.(*routev3.RouteConfiguration).GetVirtualHosts())
}

func virtualHostRefs(m proto.Message) []Ref {
	return routesRefs("", m.(*routev3.VirtualHost).GetRoutes())
}

func scopedRouteRefs(m proto.Message) []Ref {
	s := m.(*routev3.ScopedRouteConfiguration)
	if s.GetRouteConfigurationName() == "" {
		return nil
	}
	return []Ref{{TypeURL: RouteURL, Name: s.GetRouteConfigurationName(), Field: "route_configuration_name"}}
}

func virtualHostsRefs(prefix string, vhs []*routev3.VirtualHost) []Ref {
	var refs []Ref
	for i, vh := range vhs {
		refs = append(refs, routesRefs(join(prefix, fmt.Sprintf("virtual_hosts[%d]", i)), vh.GetRoutes())...)
	}
	return refs
}

func routesRefs(prefix string, routes []*routev3.Route) []Ref {
	var refs []Ref
	for j, r := range routes {
		action := r.GetRoute()
		if action == nil {
			continue
		}
		p := join(prefix, fmt.Sprintf("routes[%d].route", j))
		if c := action.GetCluster(); c != "" {
			refs = append(refs, Ref{TypeURL: ClusterURL, Name: c, Field: p + ".cluster"})
		}
		for k, wc := range action.GetWeightedClusters().GetClusters() {
			refs = append(refs, Ref{TypeURL: ClusterURL, Name: wc.GetName(), Field: fmt.Sprintf("%s.weighted_clusters.clusters[%d].name", p, k)})
		}
		for k, mp := range action.GetRequestMirrorPolicies() {
			if mp.GetCluster() != "" {
				refs = append(refs, Ref{TypeURL: ClusterURL, Name: mp.GetCluster(), Field: fmt.Sprintf("%s.request_mirror_policies[%d].cluster", p, k)})
			}
		}
	}
	return refs
}

func clusterRefs(m proto.Message) []Ref {
	c := m.(*clusterv3.Cluster)
	var refs []Ref
	if c.GetType() == clusterv3.Cluster_EDS && servedHere(c.GetEdsClusterConfig().GetEdsConfig()) {
		name := c.GetEdsClusterConfig().GetServiceName()
		field := "eds_cluster_config.service_name"
		if name == "" {
			name, field = c.GetName(), "name"
		}
		refs = append(refs, Ref{TypeURL: EndpointURL, Name: name, Field: field})
	}
	upstream := func(path string, ts *corev3.TransportSocket) {
		if tc, ok := unpack(ts.GetTypedConfig(), &tlsv3.UpstreamTlsContext{}); ok {
			refs = append(refs, tlsRefs(path+".typed_config.common_tls_context", tc.GetCommonTlsContext())...)
		}
	}
	if ts := c.GetTransportSocket(); ts != nil {
		upstream("transport_socket", ts)
	}
	for i, tm := range c.GetTransportSocketMatches() {
		upstream(fmt.Sprintf("transport_socket_matches[%d].transport_socket", i), tm.GetTransportSocket())
	}
	return refs
}

// tlsRefs lists the SDS secrets a TLS context fetches from the xDS server.
// A secret config without sds_config names a static bootstrap secret, which
// Pylon does not serve, so it is not a reference.
func tlsRefs(path string, ctx *tlsv3.CommonTlsContext) []Ref {
	var refs []Ref
	add := func(field string, s *tlsv3.SdsSecretConfig) {
		if s == nil || s.GetSdsConfig() == nil || !servedHere(s.GetSdsConfig()) {
			return
		}
		refs = append(refs, Ref{TypeURL: SecretURL, Name: s.GetName(), Field: path + "." + field})
	}
	for i, s := range ctx.GetTlsCertificateSdsSecretConfigs() {
		add(fmt.Sprintf("tls_certificate_sds_secret_configs[%d]", i), s)
	}
	add("validation_context_sds_secret_config", ctx.GetValidationContextSdsSecretConfig())
	add("combined_validation_context.validation_context_sds_secret_config", ctx.GetCombinedValidationContext().GetValidationContextSdsSecretConfig())
	return refs
}

func join(prefix, s string) string {
	if prefix == "" {
		return s
	}
	return prefix + "." + s
}
