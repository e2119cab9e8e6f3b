//lint:file-ignore SA1019 safe_regex_match is deprecated in Envoy but still valid config, and grpc-go still reads (and refuses) it: the check must see it

package route

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// maxNACKReasons bounds the reasons listed for one route configuration: a
// generated config may repeat one mistake on thousands of routes.
const maxNACKReasons = 8

// GRPCRejects lists why a proxyless gRPC client rejects (NACKs) rc: what
// Envoy takes but grpc-go's xDS client refuses when it reads a
// RouteConfiguration (gRFC A28 and its validation), in every virtual host,
// for the client refuses the whole resource over one route. The checks
// are grpc-go's (internal/xds/xdsclient/xdsresource/unmarshal_rds.go):
// a route without a match or path specifier, or with one it does not
// know (path_separated_prefix, path_match_policy, CONNECT); a regex Go's
// RE2 does not compile; an empty or custom string matcher; a weighted
// split of total weight 0 or over 2^32-1; a cluster_specifier_plugin the
// configuration does not declare; a retry policy of zero retries or a
// zero backoff. Routes with query_parameters are skipped, as the client
// skips them. At most maxNACKReasons are listed.
func GRPCRejects(rc *routev3.RouteConfiguration) []string {
	c := &nackCheck{plugins: map[string]bool{}}
	for _, p := range rc.GetClusterSpecifierPlugins() {
		c.plugins[p.GetExtension().GetName()] = true
	}
	for _, vh := range rc.GetVirtualHosts() {
		c.retry(fmt.Sprintf("virtual host %q", vh.GetName()), vh.GetRetryPolicy())
		for i, r := range vh.GetRoutes() {
			c.route(fmt.Sprintf("virtual host %q, route %q", vh.GetName(), routeID(r, i)), r)
		}
	}
	if c.more > 0 {
		c.out = append(c.out, fmt.Sprintf("and %d more", c.more))
	}
	return c.out
}

type nackCheck struct {
	plugins map[string]bool
	out     []string
	more    int
}

func (c *nackCheck) add(where, format string, args ...any) {
	if len(c.out) == maxNACKReasons {
		c.more++
		return
	}
	c.out = append(c.out, where+": "+fmt.Sprintf(format, args...))
}

func (c *nackCheck) route(where string, r *routev3.Route) {
	m := r.GetMatch()
	switch {
	case m == nil:
		c.add(where, "no match")
		return
	case len(m.GetQueryParameters()) > 0:
		return // skipped by the client, not refused
	}
	switch p := m.GetPathSpecifier().(type) {
	case nil:
		c.add(where, "match has no path specifier (prefix, path or safe_regex)")
	case *routev3.RouteMatch_Prefix, *routev3.RouteMatch_Path:
	case *routev3.RouteMatch_SafeRegex:
		c.regex(where, "match.safe_regex", p.SafeRegex.GetRegex())
	default:
		c.add(where, "match uses a path specifier gRPC clients do not know (they take prefix, path and safe_regex)")
	}
	for _, h := range m.GetHeaders() {
		c.header(where, h)
	}
	a := r.GetRoute()
	if a == nil {
		return // a redirect or direct response: not refused, the RPC fails (see Outcome)
	}
	switch s := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_WeightedClusters:
		var total uint64
		for _, wc := range s.WeightedClusters.GetClusters() {
			total += uint64(wc.GetWeight().GetValue())
		}
		if total == 0 {
			c.add(where, "weighted_clusters: every weight is 0")
		} else if total > math.MaxUint32 {
			c.add(where, "weighted_clusters: the weights add up to over 2^32-1")
		}
	case *routev3.RouteAction_ClusterSpecifierPlugin:
		if !c.plugins[s.ClusterSpecifierPlugin] {
			c.add(where, "cluster_specifier_plugin %q is not among the configuration's cluster_specifier_plugins", s.ClusterSpecifierPlugin)
		}
	}
	c.retry(where, a.GetRetryPolicy())
}

func (c *nackCheck) header(where string, h *routev3.HeaderMatcher) {
	field := fmt.Sprintf("header %q", h.GetName())
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_SafeRegexMatch:
		c.regex(where, field+" safe_regex_match", s.SafeRegexMatch.GetRegex())
	case *routev3.HeaderMatcher_StringMatch:
		switch p := s.StringMatch.GetMatchPattern().(type) {
		case nil:
			c.add(where, "%s: string_match without a pattern", field)
		case *matcherv3.StringMatcher_SafeRegex:
			c.regex(where, field+" string_match.safe_regex", p.SafeRegex.GetRegex())
		case *matcherv3.StringMatcher_Custom:
			c.add(where, "%s: a custom string matcher, which gRPC clients do not know", field)
		}
	}
}

// regex checks a regex as the client compiles it: Go's RE2.
func (c *nackCheck) regex(where, field, re string) {
	if _, err := regexp.Compile(re); err != nil {
		c.add(where, "%s %q does not compile as RE2: %v", field, re, err)
	}
}

func (c *nackCheck) retry(where string, rp *routev3.RetryPolicy) {
	if rp == nil {
		return
	}
	if n := rp.GetNumRetries(); n != nil && n.GetValue() < 1 {
		c.add(where, "retry_policy.num_retries is %d; gRPC clients require at least 1", n.GetValue())
	}
	if b := rp.GetRetryBackOff(); b != nil {
		if b.GetBaseInterval().AsDuration() <= 0 {
			c.add(where, "retry_policy.retry_back_off.base_interval must be above zero")
		}
		if m := b.GetMaxInterval(); m != nil && m.AsDuration() <= 0 {
			c.add(where, "retry_policy.retry_back_off.max_interval must be above zero")
		}
	}
}

// GRPCListenerRejects lists why a proxyless gRPC client rejects (NACKs)
// the api_listener l whose connection manager is hcm (gRFC A41 and A39,
// as grpc-go checks them): xff_num_trusted_hops or
// original_ip_detection_extensions set, routes over RDS from a source
// other than ADS or self, or without a name, and HTTP filters the client
// cannot run as a chain: none, a name twice, the router not last or not
// there. Filters it does not know are not judged here (which it supports
// depends on its version): the explanation lists them as passed through.
func GRPCListenerRejects(l string, hcm *hcmv3.HttpConnectionManager) []string {
	c := &nackCheck{}
	where := fmt.Sprintf("listener %q", l)
	if hcm.GetXffNumTrustedHops() != 0 {
		c.add(where, "xff_num_trusted_hops is %d; gRPC clients require it unset or 0", hcm.GetXffNumTrustedHops())
	}
	if len(hcm.GetOriginalIpDetectionExtensions()) > 0 {
		c.add(where, "original_ip_detection_extensions must be empty for gRPC clients")
	}
	if rds := hcm.GetRds(); rds != nil {
		if src := rds.GetConfigSource(); src.GetAds() == nil && src.GetSelf() == nil {
			c.add(where, "rds.config_source must be ads or self for gRPC clients")
		}
		if rds.GetRouteConfigName() == "" {
			c.add(where, "rds.route_config_name is empty")
		}
	}
	filters := hcm.GetHttpFilters()
	seen := map[string]bool{}
	for i, f := range filters {
		if seen[f.GetName()] {
			c.add(where, "http_filters[%d]: the name %q twice", i, f.GetName())
		}
		seen[f.GetName()] = true
		if isRouter(f) && i != len(filters)-1 {
			c.add(where, "http_filters[%d]: the router is a terminal filter and must be last", i)
		}
	}
	switch {
	case len(filters) == 0:
		c.add(where, "http_filters is empty: gRPC clients need the router, last")
	case !isRouter(filters[len(filters)-1]) && !filters[len(filters)-1].GetIsOptional():
		c.add(where, "http_filters ends with %q, not the router (a terminal filter must be last)", filters[len(filters)-1].GetName())
	}
	return c.out
}

func isRouter(f *hcmv3.HttpFilter) bool {
	return strings.HasSuffix(f.GetTypedConfig().GetTypeUrl(), ".router.v3.Router") || f.GetName() == routerName && f.GetTypedConfig() == nil
}
