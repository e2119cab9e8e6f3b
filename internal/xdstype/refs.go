package xdstype

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
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
	for i, lf := range l.GetListenerFilters() {
		refs = append(refs, extensionRef(fmt.Sprintf("listener_filters[%d]", i), lf.GetName(), lf.GetConfigDiscovery())...)
	}
	chain := func(path string, fc *listenerv3.FilterChain) {
		if fc == nil {
			return
		}
		for j, f := range fc.GetFilters() {
			fp := fmt.Sprintf("%s.filters[%d]", path, j)
			refs = append(refs, extensionRef(fp, f.GetName(), f.GetConfigDiscovery())...)
			refs = append(refs, networkFilterRefs(fp+".typed_config", f.GetTypedConfig())...)
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

// extensionRef is the ECDS reference a filter with config_discovery makes
// (listener, network, HTTP and upstream filters): Envoy subscribes to the
// TypedExtensionConfig named like the filter. The reference carries the
// config_discovery.type_urls, which the config must match.
//
// A filter with a default_config and apply_default_config_without_warming
// is served by Envoy from the default at once, without waiting for ECDS,
// and again when the resource is removed, so its reference is Optional. A
// default alone does not make it so: Envoy still warms the listener until
// the resource arrives, or the initial fetch times out (15 s by default),
// so a missing resource stalls every listener update (Envoy's
// ExtensionConfigSource docs; FilterConfigSubscription in
// source/common/filter/config_discovery_impl.cc).
func extensionRef(path, name string, cd *corev3.ExtensionConfigSource) []Ref {
	if cd == nil || !servedHere(cd.GetConfigSource()) {
		return nil
	}
	return []Ref{{
		TypeURL: ExtensionConfURL, Name: name, Field: path + ".name",
		Accept: cd.GetTypeUrls(), AcceptField: path + ".config_discovery.type_urls",
		Optional: cd.GetDefaultConfig() != nil && cd.GetApplyDefaultConfigWithoutWarming(),
	}}
}

// networkFilterRefs follows the network filters that name other resources:
// the HTTP connection manager (routes, scoped routes' routes, ECDS HTTP
// filters) and the TCP proxy (clusters).
func networkFilterRefs(path string, cfg *anypb.Any) []Ref {
	if hcm, ok := unpack(cfg, &hcmv3.HttpConnectionManager{}); ok {
		return hcmRefs(path, hcm)
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

func hcmRefs(path string, hcm *hcmv3.HttpConnectionManager) []Ref {
	var refs []Ref
	switch {
	case hcm.GetRds() != nil:
		if rds := hcm.GetRds(); servedHere(rds.GetConfigSource()) {
			refs = append(refs, Ref{TypeURL: RouteURL, Name: rds.GetRouteConfigName(), Field: path + ".rds.route_config_name"})
		}
	case hcm.GetRouteConfig() != nil:
		refs = append(refs, virtualHostsRefs(path+".route_config", hcm.GetRouteConfig().GetVirtualHosts())...)
	case hcm.GetScopedRoutes() != nil:
		// With scoped_rds, Envoy subscribes to every ScopedRouteConfiguration
		// (SRDS is a wildcard type): they name no one resource here, and
		// each is checked for the route configuration it names. Inline
		// scopes name theirs here, fetched from rds_config_source.
		sr := hcm.GetScopedRoutes()
		if servedHere(sr.GetRdsConfigSource()) {
			for i, s := range sr.GetScopedRouteConfigurationsList().GetScopedRouteConfigurations() {
				refs = append(refs, scopeRefs(fmt.Sprintf("%s.scoped_routes.scoped_route_configurations_list.scoped_route_configurations[%d]", path, i), s)...)
			}
		}
	}
	refs = append(refs, httpFiltersRefs(path+".http_filters", hcm.GetHttpFilters())...)
	return refs
}

// httpFiltersRefs lists the ECDS references of a chain of HTTP filters,
// and of the router's upstream HTTP filters.
func httpFiltersRefs(path string, filters []*hcmv3.HttpFilter) []Ref {
	var refs []Ref
	for k, hf := range filters {
		fp := fmt.Sprintf("%s[%d]", path, k)
		refs = append(refs, extensionRef(fp, hf.GetName(), hf.GetConfigDiscovery())...)
		if r, ok := unpack(hf.GetTypedConfig(), &routerv3.Router{}); ok {
			refs = append(refs, httpFiltersRefs(fp+".typed_config.upstream_http_filters", r.GetUpstreamHttpFilters())...)
		}
	}
	return refs
}

func routeConfigRefs(m proto.Message) []Ref {
	return virtualHostsRefs("", m.(*routev3.RouteConfiguration).GetVirtualHosts())
}

func virtualHostRefs(m proto.Message) []Ref {
	return routesRefs("", m.(*routev3.VirtualHost).GetRoutes())
}

func scopedRouteRefs(m proto.Message) []Ref {
	return scopeRefs("", m.(*routev3.ScopedRouteConfiguration))
}

// scopeRefs: a scope names its route configuration (fetched by RDS, on
// demand or not: either way it must exist), or carries one inline.
func scopeRefs(prefix string, s *routev3.ScopedRouteConfiguration) []Ref {
	if rc := s.GetRouteConfiguration(); rc != nil {
		return virtualHostsRefs(join(prefix, "route_configuration"), rc.GetVirtualHosts())
	}
	if s.GetRouteConfigurationName() == "" {
		return nil
	}
	return []Ref{{TypeURL: RouteURL, Name: s.GetRouteConfigurationName(), Field: join(prefix, "route_configuration_name")}}
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
	if ct := c.GetClusterType(); ct.GetName() == "envoy.clusters.aggregate" {
		// An aggregate's clients fetch each of its clusters.
		if ac, ok := unpack(ct.GetTypedConfig(), &aggregatev3.ClusterConfig{}); ok {
			for i, n := range ac.GetClusters() {
				refs = append(refs, Ref{TypeURL: ClusterURL, Name: n, Field: fmt.Sprintf("cluster_type.typed_config.clusters[%d]", i)})
			}
		}
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
	// Upstream network filters and upstream HTTP filters take ECDS too.
	for i, f := range c.GetFilters() {
		refs = append(refs, extensionRef(fmt.Sprintf("filters[%d]", i), f.GetName(), f.GetConfigDiscovery())...)
	}
	opts := c.GetTypedExtensionProtocolOptions()
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if po, ok := unpack(opts[k], &upstreamhttpv3.HttpProtocolOptions{}); ok {
			refs = append(refs, httpFiltersRefs(fmt.Sprintf("typed_extension_protocol_options[%s].http_filters", k), po.GetHttpFilters())...)
		}
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
