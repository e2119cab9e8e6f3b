// Package translate turns the high-level model into Envoy v3 resources: one
// small pure function per emitted resource, model in, protos out, no I/O.
// References between objects are assumed checked (compile does that); the
// output is validated with the raw resources.
package translate

import (
	"cmp"
	"sort"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	localrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Defaults the model applies where a field is left out.
const (
	DefaultConnectTimeout = 5 * time.Second
	localRateLimitFilter  = "envoy.filters.http.local_ratelimit"
)

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func dur(d *nodegroup.Duration, def time.Duration) *durationpb.Duration {
	if d == nil {
		return durationpb.New(def)
	}
	return durationpb.New(d.Std())
}

// pack wraps m in an Any; the messages here always marshal.
func pack(m proto.Message) *anypb.Any {
	// Deterministic: the Any's bytes are part of the resource's encoding,
	// whose hash is its version; a map inside (RBAC policies by name)
	// would otherwise encode in a new order on every translation.
	a := &anypb.Any{}
	err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true})
	if err != nil {
		panic(err)
	}
	return a
}

func sds(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: ads()}
}

var lbPolicies = map[string]clusterv3.Cluster_LbPolicy{
	"":              clusterv3.Cluster_ROUND_ROBIN,
	"round_robin":   clusterv3.Cluster_ROUND_ROBIN,
	"least_request": clusterv3.Cluster_LEAST_REQUEST,
	"random":        clusterv3.Cluster_RANDOM,
	"ring_hash":     clusterv3.Cluster_RING_HASH,
	"maglev":        clusterv3.Cluster_MAGLEV,
}

// LBPolicies lists the load-balancing policies a service may name.
func LBPolicies() []string {
	var out []string
	for k := range lbPolicies {
		if k != "" {
			out = append(out, k)
		}
	}
	out = append(out, GRPCOnlyLBPolicies()...)
	sort.Strings(out)
	return out
}

// Protocols lists the protocols a service may name.
func Protocols() []string { return []string{"grpc", "http1", "http2", "tcp"} }

// Cluster is the cluster of a service: EDS, LOGICAL_DNS or aggregate.
func Cluster(s *model.Service) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 s.Name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
		ConnectTimeout:       dur(s.ConnectTimeout, DefaultConnectTimeout),
		LbPolicy:             lbPolicies[s.LB],
	}
	if p := grpcLBPolicies[s.LB]; p != nil {
		c.LoadBalancingPolicy = p(s)
	}
	discovery(c, s)
	if s.Protocol == "http2" || s.Protocol == "grpc" {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": pack(&httpv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
				}},
			}),
		}
	}
	if cb := s.CircuitBreaker; cb != nil {
		t := &clusterv3.CircuitBreakers_Thresholds{Priority: corev3.RoutingPriority_DEFAULT}
		t.MaxConnections = u32(cb.MaxConnections)
		t.MaxPendingRequests = u32(cb.MaxPendingRequests)
		t.MaxRequests = u32(cb.MaxRequests)
		t.MaxRetries = u32(cb.MaxRetries)
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{t}}
	}
	if hc := s.HealthCheck; hc != nil {
		c.HealthChecks = []*corev3.HealthCheck{healthCheck(hc)}
	}
	if od := s.Outlier; od != nil {
		c.OutlierDetection = outlierDetection(od)
	}
	if t := s.TLS; t != nil && t.Provider != "" {
		c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(clientTLS(t.Provider, t.SNI))}}
	} else if t != nil {
		ctx := &tlsv3.UpstreamTlsContext{Sni: t.SNI, CommonTlsContext: &tlsv3.CommonTlsContext{}}
		if t.CA != "" {
			ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{ValidationContextSdsSecretConfig: sds(t.CA)}
		}
		if t.ClientCert != "" {
			ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sds(t.ClientCert)}
		}
		c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(ctx)}}
	}
	return c
}

// Outlier detection's defaults, as Envoy documents them and gRPC (A50)
// applies them.
const (
	DefaultSuccessRateMinimumHosts        = 5
	DefaultSuccessRateRequestVolume       = 100
	DefaultSuccessRateStdevFactor         = 1900
	DefaultFailurePercentageThreshold     = 85
	DefaultFailurePercentageMinimumHosts  = 5
	DefaultFailurePercentageRequestVolume = 50
)

// outlierDetection writes the detection's thresholds out in full, defaults
// included: success rate is on unless disabled, and grpc-js 1.14 reads an
// unset threshold of an enabled detection as undefined and crashes in its
// ejection timer (test/interop shows it); Envoy and grpc-go read the
// written defaults as they would the unset ones.
func outlierDetection(od *model.OutlierDetection) *clusterv3.OutlierDetection {
	out := &clusterv3.OutlierDetection{
		Consecutive_5Xx:          u32(od.Consecutive5xx),
		Interval:                 optDur(od.Interval),
		BaseEjectionTime:         optDur(od.BaseEjectionTime),
		MaxEjectionPercent:       u32(od.MaxEjectionPercent),
		SuccessRateMinimumHosts:  wrapperspb.UInt32(DefaultSuccessRateMinimumHosts),
		SuccessRateRequestVolume: wrapperspb.UInt32(DefaultSuccessRateRequestVolume),
		SuccessRateStdevFactor:   wrapperspb.UInt32(DefaultSuccessRateStdevFactor),
	}
	if fp := od.FailurePercentage; fp != nil {
		// Envoy and gRPC leave failure-percentage ejection off unless it
		// is enforced: asking for it is enforcing it.
		out.EnforcingFailurePercentage = wrapperspb.UInt32(100)
		out.FailurePercentageThreshold = wrapperspb.UInt32(cmp.Or(fp.Threshold, DefaultFailurePercentageThreshold))
		out.FailurePercentageMinimumHosts = wrapperspb.UInt32(cmp.Or(fp.MinimumHosts, DefaultFailurePercentageMinimumHosts))
		out.FailurePercentageRequestVolume = wrapperspb.UInt32(cmp.Or(fp.RequestVolume, DefaultFailurePercentageRequestVolume))
	}
	return out
}

func healthCheck(hc *model.HealthCheck) *corev3.HealthCheck {
	h := &corev3.HealthCheck{
		Timeout:            dur(hc.Timeout, time.Second),
		Interval:           dur(hc.Interval, 5*time.Second),
		UnhealthyThreshold: wrapperspb.UInt32(max(hc.UnhealthyThreshold, 1)),
		HealthyThreshold:   wrapperspb.UInt32(max(hc.HealthyThreshold, 1)),
	}
	if hc.Path != "" {
		h.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: hc.Path}}
	} else {
		h.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
	}
	return h
}

func u32(v uint32) *wrapperspb.UInt32Value {
	if v == 0 {
		return nil
	}
	return wrapperspb.UInt32(v)
}

func optDur(d *nodegroup.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(d.Std())
}

var healthStatus = map[string]corev3.HealthStatus{
	"":          corev3.HealthStatus_UNKNOWN,
	"unknown":   corev3.HealthStatus_UNKNOWN,
	"healthy":   corev3.HealthStatus_HEALTHY,
	"unhealthy": corev3.HealthStatus_UNHEALTHY,
	"draining":  corev3.HealthStatus_DRAINING,
}

// HealthStatuses lists the health values an endpoint may have.
func HealthStatuses() []string { return []string{"draining", "healthy", "unhealthy", "unknown"} }

// Endpoints is the ClusterLoadAssignment of a service: endpoints grouped by
// locality and priority, each locality with a weight (gRPC drops localities
// without one).
func Endpoints(s *model.Service) *endpointv3.ClusterLoadAssignment {
	type key struct {
		region, zone, subZone string
		priority              uint32
	}
	groups := map[key][]*endpointv3.LbEndpoint{}
	var order []key
	for _, e := range s.Endpoints {
		k := key{e.Region, e.Zone, e.SubZone, e.Priority}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socket(e.Address, e.Port),
			}},
			HealthStatus:        healthStatus[e.Health],
			LoadBalancingWeight: wrapperspb.UInt32(max(e.Weight, 1)),
		})
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: s.Name}
	for _, k := range order {
		cla.Endpoints = append(cla.Endpoints, &endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Region: k.region, Zone: k.zone, SubZone: k.subZone},
			Priority:            k.priority,
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints:         groups[k],
		})
	}
	return cla
}

func socket(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// RouteConfiguration is a route table.
func RouteConfiguration(rt *model.RouteTable) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: rt.Name}
	for _, vh := range rt.VirtualHosts {
		v := &routev3.VirtualHost{Name: vh.Name, Domains: vh.Domains}
		for i := range vh.Routes {
			v.Routes = append(v.Routes, route(&vh.Routes[i]))
		}
		rc.VirtualHosts = append(rc.VirtualHosts, v)
	}
	return rc
}

// UsesRateLimit reports whether any route of the table has a rate limit,
// so its listeners need the local rate limit filter.
func UsesRateLimit(rt *model.RouteTable) bool {
	for _, vh := range rt.VirtualHosts {
		for _, r := range vh.Routes {
			if r.Limit != nil {
				return true
			}
		}
	}
	return false
}

func route(r *model.Route) *routev3.Route {
	out := &routev3.Route{Match: match(&r.Match)}
	switch {
	case r.Redirect != nil:
		out.Action = &routev3.Route_Redirect{Redirect: redirect(r.Redirect)}
	case r.Direct != nil:
		dr := &routev3.DirectResponseAction{Status: r.Direct.Status}
		if r.Direct.Body != "" {
			dr.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: r.Direct.Body}}
		}
		out.Action = &routev3.Route_DirectResponse{DirectResponse: dr}
	default:
		a := action(r.To)
		if r.Timeout != nil {
			a.Timeout = durationpb.New(r.Timeout.Std())
		}
		if rp := r.Retries; rp != nil {
			on := rp.On
			if on == "" {
				on = "5xx,reset,connect-failure"
			}
			a.RetryPolicy = &routev3.RetryPolicy{RetryOn: on, NumRetries: u32(rp.Attempts), PerTryTimeout: optDur(rp.PerTryTimeout)}
		}
		out.Action = &routev3.Route_Route{Route: a}
	}
	if h := r.Request; h != nil {
		out.RequestHeadersToAdd, out.RequestHeadersToRemove = headers(h)
	}
	if h := r.Response; h != nil {
		out.ResponseHeadersToAdd, out.ResponseHeadersToRemove = headers(h)
	}
	if l := r.Limit; l != nil {
		per := time.Second
		if l.Per != nil {
			per = l.Per.Std()
		}
		out.TypedPerFilterConfig = map[string]*anypb.Any{localRateLimitFilter: pack(&localrlv3.LocalRateLimit{
			StatPrefix:  "route_rate_limit",
			TokenBucket: &typev3.TokenBucket{MaxTokens: l.Requests, TokensPerFill: wrapperspb.UInt32(l.Requests), FillInterval: durationpb.New(per)},
			FilterEnabled: &corev3.RuntimeFractionalPercent{
				DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
			},
			FilterEnforced: &corev3.RuntimeFractionalPercent{
				DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
			},
		})}
	}
	return out
}

// action routes to one cluster, or splits by weight without the zero
// shares (a 0/100 split is one cluster).
func action(to []model.Target) *routev3.RouteAction {
	var live []model.Target
	for _, t := range to {
		if t.Weight > 0 || len(to) == 1 {
			live = append(live, t)
		}
	}
	if len(live) == 1 {
		return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: live[0].Service}}
	}
	wc := &routev3.WeightedCluster{}
	for _, t := range live {
		wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: t.Service, Weight: wrapperspb.UInt32(t.Weight)})
	}
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}
}

// pathMatch is a route match on the path: exact, regex or prefix, in that
// order of precedence, else the prefix def.
func pathMatch(path, regex string, prefix *string, def string) *routev3.RouteMatch {
	out := &routev3.RouteMatch{}
	switch {
	case path != "":
		out.PathSpecifier = &routev3.RouteMatch_Path{Path: path}
	case regex != "":
		out.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: regex}}
	case prefix != nil:
		out.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: *prefix}
	default:
		out.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: def}
	}
	return out
}

func match(m *model.RouteMatch) *routev3.RouteMatch {
	out := pathMatch(m.Path, m.Regex, m.Prefix, "/")
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, headerMatch(h))
	}
	if m.Method != "" {
		out.Headers = append(out.Headers, headerMatch(model.HeaderMatch{Name: ":method", Exact: m.Method}))
	}
	return out
}

func headerMatch(h model.HeaderMatch) *routev3.HeaderMatcher {
	hm := &routev3.HeaderMatcher{Name: h.Name}
	switch {
	case h.Exact != "":
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h.Exact}}}
	case h.Prefix != "":
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: h.Prefix}}}
	case h.Regex != "":
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: h.Regex}}}}
	default:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	}
	return hm
}

func redirect(r *model.Redirect) *routev3.RedirectAction {
	out := &routev3.RedirectAction{HostRedirect: r.Host}
	if r.Path != "" {
		out.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: r.Path}
	}
	if r.HTTPS {
		out.SchemeRewriteSpecifier = &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}
	}
	codes := map[uint32]routev3.RedirectAction_RedirectResponseCode{
		302: routev3.RedirectAction_FOUND, 303: routev3.RedirectAction_SEE_OTHER,
		307: routev3.RedirectAction_TEMPORARY_REDIRECT, 308: routev3.RedirectAction_PERMANENT_REDIRECT,
	}
	out.ResponseCode = codes[r.Code] // 301 and unset: MOVED_PERMANENTLY, the zero value
	return out
}

func headers(h *model.Headers) ([]*corev3.HeaderValueOption, []string) {
	names := make([]string, 0, len(h.Set))
	for k := range h.Set {
		names = append(names, k)
	}
	sort.Strings(names)
	var add []*corev3.HeaderValueOption
	for _, k := range names {
		add = append(add, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: k, Value: h.Set[k]},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	return add, h.Remove
}

// Listener is a listener: an HTTP connection manager using its route
// table over RDS, or a TCP proxy to a service; TLS terminated with secrets
// from SDS, one filter chain per SNI entry. rateLimited reports whether the
// route tables it uses need the local rate limit filter.
func Listener(l *model.Listener, rateLimited func(table string) bool) *listenerv3.Listener {
	addr := l.Address
	if addr == "" {
		addr = "0.0.0.0"
	}
	out := &listenerv3.Listener{Name: l.Name, Address: socket(addr, l.Port)}
	chain := func(routes, secret string, names []string) *listenerv3.FilterChain {
		fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{networkFilter(l, routes, rateLimited(routes))}}
		if len(names) > 0 {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: names}
		}
		if secret != "" {
			fc.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(&tlsv3.DownstreamTlsContext{
				CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds(secret)}},
			})}}
		}
		return fc
	}
	for _, sni := range l.SNI {
		routes := sni.Routes
		if routes == "" {
			routes = l.Routes
		}
		out.FilterChains = append(out.FilterChains, chain(routes, sni.Secret, sni.Names))
	}
	if len(l.SNI) > 0 {
		out.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: pack(&tlsinspectorv3.TlsInspector{})},
		}}
	}
	if len(l.SNI) == 0 || l.TLS != nil {
		secret := ""
		if l.TLS != nil {
			secret = l.TLS.Secret
		}
		out.FilterChains = append(out.FilterChains, chain(l.Routes, secret, nil))
	}
	return out
}

func networkFilter(l *model.Listener, routes string, rateLimited bool) *listenerv3.Filter {
	if l.Protocol == "tcp" {
		return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(&tcpproxyv3.TcpProxy{
			StatPrefix:       l.Name,
			ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: l.Service},
		})}}
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(hcm(l.Name, routes, rateLimited))}}
}

// hcm is an HTTP connection manager taking routes over RDS from ADS and
// ending with the router (as both Envoy and gRPC require).
func hcm(statPrefix, routes string, rateLimited bool) *hcmv3.HttpConnectionManager {
	var filters []*hcmv3.HttpFilter
	if rateLimited {
		// Configured per route; here it only needs to be present.
		filters = append(filters, &hcmv3.HttpFilter{Name: localRateLimitFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&localrlv3.LocalRateLimit{StatPrefix: "http_local_rate_limiter"})}})
	}
	filters = append(filters, &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&routerv3.Router{})}})
	return &hcmv3.HttpConnectionManager{
		StatPrefix:     statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: ads(), RouteConfigName: routes}},
		HttpFilters:    filters,
	}
}

// Secret is TLS material read from files: a certificate chain and key, or
// a CA to validate peers with. The bytes are inlined; they never leave
// Pylon except to the proxies that need them.
func Secret(s *model.Secret, files map[string][]byte) *tlsv3.Secret {
	out := &tlsv3.Secret{Name: s.Name}
	if s.CertFile != "" {
		out.Type = &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: files[s.CertFile]}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: files[s.KeyFile]}},
		}}
		return out
	}
	out.Type = &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: files[s.CAFile]}},
	}}
	return out
}

// GRPCListener is the API listener gRPC clients ask for when they dial
// xds:///target: an HTTP connection manager using the route configuration
// of the same name.
func GRPCListener(g *model.GRPCTarget) *listenerv3.Listener {
	h := hcm(g.Target, g.Target, false)
	if hasFault(g) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{faultFilter()}, h.HttpFilters...)
	}
	return &listenerv3.Listener{
		Name:        g.Target,
		ApiListener: &listenerv3.ApiListener{ApiListener: pack(h)},
	}
}

// GRPCRoutes is the route configuration of a gRPC target: its routes in
// order, then, when the target has `to`, a last route taking every RPC. It
// writes only what grpc-go's RDS parser reads (grpc-go v1.85.0,
// internal/xds/xdsclient/xdsresource/unmarshal_rds.go, routesProtoToSlice
// and generateRetryConfig): a path specifier on every match, header
// matchers as StringMatcher or present_match, a cluster or weighted
// clusters, max_stream_duration and retry_policy.
func GRPCRoutes(g *model.GRPCTarget) *routev3.RouteConfiguration {
	vh := &routev3.VirtualHost{
		Name: g.Target,
		// grpc-go picks the virtual host whose domain matches the host of
		// xds:///target (xdsresource.FindBestMatchingVirtualHost).
		Domains: []string{g.Target},
		// A route without a retry policy of its own takes the virtual
		// host's (grpc-go internal/xds/resolver/serviceconfig.go,
		// SelectConfig); so does Envoy.
		RetryPolicy: grpcRetryPolicy(g.Retries),
	}
	for i := range g.Routes {
		r := &g.Routes[i]
		vh.Routes = append(vh.Routes, &routev3.Route{
			Match:                grpcMatch(&r.Match),
			Action:               &routev3.Route_Route{Route: grpcAction(r.To, cmpOr(r.Timeout, g.Timeout), r.Retries, hashOr(r.Hash, g.Hash))},
			TypedPerFilterConfig: grpcFaultConfig(faultOr(r.Fault, g.Fault)),
		})
	}
	if len(g.To) > 0 {
		vh.Routes = append(vh.Routes, &routev3.Route{
			// gRPC needs a path specifier on every match; the empty prefix
			// takes every method.
			Match:                &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
			Action:               &routev3.Route_Route{Route: grpcAction(g.To, g.Timeout, nil, g.Hash)},
			TypedPerFilterConfig: grpcFaultConfig(g.Fault),
		})
	}
	return &routev3.RouteConfiguration{Name: g.Target, VirtualHosts: []*routev3.VirtualHost{vh}}
}

// cmpOr returns the first non-nil duration.
func cmpOr(a, b *nodegroup.Duration) *nodegroup.Duration {
	if a != nil {
		return a
	}
	return b
}

// grpcAction routes to the services with a timeout and a retry policy.
//
// The timeout is written as max_stream_duration.max_stream_duration:
// grpc-go reads grpc_timeout_header_max first and max_stream_duration when
// that is unset (unmarshal_rds.go, "Prefer grpc_timeout_header_max"), and
// applies the result as the RPC's deadline cap (MethodConfig.Timeout, in
// internal/xds/resolver/serviceconfig.go); a route without one takes the
// listener's. Zero means no deadline from xDS.
func grpcAction(to []model.Target, timeout *nodegroup.Duration, retries *model.GRPCRetries, hash *model.GRPCHash) *routev3.RouteAction {
	a := action(to)
	if timeout != nil {
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(timeout.Std())}
	}
	a.RetryPolicy = grpcRetryPolicy(retries)
	a.HashPolicy = grpcHashPolicy(hash)
	return a
}

// GRPCChannelIDKey is the filter state key gRPC clients read as the
// channel's own id (gRFC A42).
const GRPCChannelIDKey = "io.grpc.channel_id"

// grpcHashPolicy is a hash policy as gRPC clients read it (gRFC A42): a
// header, or the filter state key of the channel id. Envoy reads the
// header the same way; the channel id means nothing to it.
func grpcHashPolicy(h *model.GRPCHash) []*routev3.RouteAction_HashPolicy {
	switch {
	case h == nil:
		return nil
	case h.Channel:
		return []*routev3.RouteAction_HashPolicy{{PolicySpecifier: &routev3.RouteAction_HashPolicy_FilterState_{
			FilterState: &routev3.RouteAction_HashPolicy_FilterState{Key: GRPCChannelIDKey}}}}
	}
	return []*routev3.RouteAction_HashPolicy{{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
		Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: strings.ToLower(h.Header)}}}}
}

// hashOr returns the first non-nil hash.
func hashOr(a, b *model.GRPCHash) *model.GRPCHash {
	if a != nil {
		return a
	}
	return b
}

// DefaultGRPCRetryBase is gRFC A44's (and grpc-go's) default base backoff.
const DefaultGRPCRetryBase = 25 * time.Millisecond

// grpcRetryPolicy is a retry policy as grpc-go reads it (generateRetryConfig):
// retry_on a comma-separated list of status code names, num_retries (unset:
// 1), and retry_back_off, whose base_interval Envoy's validation requires
// whenever the back-off is set.
func grpcRetryPolicy(r *model.GRPCRetries) *routev3.RetryPolicy {
	if r == nil {
		return nil
	}
	rp := &routev3.RetryPolicy{RetryOn: strings.Join(r.On, ","), NumRetries: u32(r.NumRetries)}
	if r.BaseInterval != nil || r.MaxInterval != nil {
		rp.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: dur(r.BaseInterval, DefaultGRPCRetryBase),
			MaxInterval:  optDur(r.MaxInterval),
		}
	}
	return rp
}

// grpcMatch is a route match on the method path and request metadata.
// gRPC matches a header against its metadata keys, which are lowercase,
// with binary (-bin) entries removed (compile refuses names that could never
// match).
func grpcMatch(m *model.GRPCMatch) *routev3.RouteMatch {
	// Without a path match every method: gRPC's paths all start with "/",
	// but "" is how gRPC's own configs write the catch-all.
	out := pathMatch(m.Path, m.Regex, m.Prefix, "")
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, grpcHeaderMatch(h))
	}
	return out
}

// grpcHeaderMatch matches a metadata key. It writes the header_match_specifier
// fields every gRPC xDS client reads (exact_match, prefix_match,
// safe_regex_match, present_match; gRFC A28), not string_match: clients
// older than gRFC A63 (C-core before 1.56, e.g. Debian 12's grpcio 1.51)
// NACK the whole RouteConfiguration on it ("Invalid route header matcher
// specified"), and grpc-go reads both (unmarshal_rds.go turns the old
// fields into a StringMatcher). The name is lowercase, as metadata keys
// are: grpc-go lowercases it itself, other clients may not.
func grpcHeaderMatch(h model.HeaderMatch) *routev3.HeaderMatcher {
	hm := &routev3.HeaderMatcher{Name: strings.ToLower(h.Name)}
	switch {
	case h.Exact != "":
		//lint:ignore SA1019 string_match breaks clients older than gRFC A63 (see above)
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_ExactMatch{ExactMatch: h.Exact}
	case h.Prefix != "":
		//lint:ignore SA1019 string_match breaks clients older than gRFC A63 (see above)
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: h.Prefix}
	case h.Regex != "":
		//lint:ignore SA1019 string_match breaks clients older than gRFC A63 (see above)
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: h.Regex}}
	default:
		hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	}
	return hm
}
