package route

//lint:file-ignore SA1019 the older header_match_specifier fields (exact_match, prefix_match, ...) are still valid Envoy config, and what Pylon writes for gRPC clients older than gRFC A63 (translate.grpcHeaderMatch): the engine must read them

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// applyAction fills in what the matched route does.
func applyAction(res *Resources, r *routev3.Route, req *Request, m *matcher, out *Result) {
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		forward(res, a.Route, req, m.notes, out)
	case *routev3.Route_Redirect:
		out.Action = "redirect"
		if req.GRPC {
			grpcUnsupported(out, "redirect")
			return
		}
		loc, err := redirectLocation(a.Redirect, r.GetMatch(), req, m)
		if err != nil {
			m.notes.add("redirect location: %v", err)
		}
		code := redirectCodes[a.Redirect.GetResponseCode()]
		out.Redirect = &RedirectResult{Location: loc, Code: code}
		out.Status = code
		out.Outcome = fmt.Sprintf("the proxy redirects with %d to %s", code, loc)
	case *routev3.Route_DirectResponse:
		out.Action = "direct_response"
		if req.GRPC {
			grpcUnsupported(out, "direct_response")
			return
		}
		d := &DirectResult{Status: a.DirectResponse.GetStatus()}
		switch b := a.DirectResponse.GetBody().GetSpecifier().(type) {
		case *corev3.DataSource_InlineString:
			d.Body = b.InlineString
		case *corev3.DataSource_InlineBytes:
			d.Body = string(b.InlineBytes)
		case nil:
		default:
			m.notes.add("direct response body from a file or the environment (not read)")
		}
		out.Direct, out.Status = d, d.Status
		out.Outcome = fmt.Sprintf("the proxy answers %d itself", d.Status)
	default:
		out.Action = "other"
		m.notes.add("route action %T (not simulated)", a)
		out.Outcome = "the route's action is not simulated"
	}
}

// grpcUnsupported is a gRPC client on a route that does not forward: grpc-go
// fails the RPC (its resolver: "matched route does not have a supported
// route action type").
func grpcUnsupported(out *Result, action string) {
	out.GRPCStatus = "UNAVAILABLE"
	out.Outcome = "the route is a " + action + ", which gRPC clients do not follow: the RPC fails with UNAVAILABLE"
}

var redirectCodes = map[routev3.RedirectAction_RedirectResponseCode]uint32{
	routev3.RedirectAction_MOVED_PERMANENTLY:  301,
	routev3.RedirectAction_FOUND:              302,
	routev3.RedirectAction_SEE_OTHER:          303,
	routev3.RedirectAction_TEMPORARY_REDIRECT: 307,
	routev3.RedirectAction_PERMANENT_REDIRECT: 308,
}

// forward is a route action: the cluster or the weighted split.
func forward(res *Resources, a *routev3.RouteAction, req *Request, n *notes, out *Result) {
	out.Action = "route"
	noteRewrites(a, n)
	switch cs := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		out.Clusters = []ClusterShare{clusterShare(res, cs.Cluster, 0, 1, req.GRPC, n)}
	case *routev3.RouteAction_WeightedClusters:
		var total uint64
		for _, c := range cs.WeightedClusters.GetClusters() {
			total += uint64(c.GetWeight().GetValue())
		}
		if cs.WeightedClusters.GetRuntimeKeyPrefix() != "" {
			n.add("weighted_clusters.runtime_key_prefix (the configured weights are used)")
		}
		for _, c := range cs.WeightedClusters.GetClusters() {
			name := c.GetName()
			if name == "" {
				n.add("a weighted cluster named by header %q (cluster_header; not simulated)", c.GetClusterHeader())
			}
			w := c.GetWeight().GetValue()
			out.Clusters = append(out.Clusters, clusterShare(res, name, w, share(w, total), req.GRPC, n))
		}
	case *routev3.RouteAction_ClusterHeader:
		v, ok := req.header(strings.ToLower(cs.ClusterHeader))
		n.add("cluster_header %q (the cluster is named by the request; this request's value: %q, present: %v)", cs.ClusterHeader, v, ok)
		out.Outcome = "the cluster is named by the request header " + cs.ClusterHeader + " (not simulated)"
		return
	default:
		n.add("cluster specifier %T (not simulated)", cs)
		out.Outcome = "the cluster is chosen by a plugin (not simulated)"
		return
	}
	forwardOutcome(a, req, out)
}

// forwardOutcome says where the request goes, or how it fails when a
// cluster does not exist.
func forwardOutcome(a *routev3.RouteAction, req *Request, out *Result) {
	for _, c := range out.Clusters {
		if !c.Missing || c.Share == 0 {
			continue
		}
		if req.GRPC {
			out.GRPCStatus = "UNAVAILABLE"
			out.Outcome = fmt.Sprintf("cluster %s does not exist on this node: the RPCs it takes fail with UNAVAILABLE", c.Name)
			return
		}
		out.Status = 503
		if a.GetClusterNotFoundResponseCode() == routev3.RouteAction_NOT_FOUND {
			out.Status = 404
		} else if a.GetClusterNotFoundResponseCode() == routev3.RouteAction_INTERNAL_SERVER_ERROR {
			out.Status = 500
		}
		out.Outcome = fmt.Sprintf("cluster %s does not exist on this node: the requests it takes get %d", c.Name, out.Status)
		return
	}
	out.Outcome = "forwarded to " + clusterList(out.Clusters)
}

func noteRewrites(a *routev3.RouteAction, n *notes) {
	if a.GetPrefixRewrite() != "" || a.GetRegexRewrite() != nil || a.GetPathRewritePolicy() != nil {
		n.add("path rewrite (the upstream request's path changes; where it goes does not)")
	}
	if a.GetHostRewriteSpecifier() != nil {
		n.add("host rewrite (the upstream request's host changes; where it goes does not)")
	}
	if len(a.GetRequestMirrorPolicies()) > 0 {
		n.add("request mirroring (copies go to other clusters too)")
	}
}

func share(w uint32, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return float64(w) / float64(total)
}

func clusterList(cs []ClusterShare) string {
	var parts []string
	for _, c := range cs {
		if len(cs) == 1 {
			parts = append(parts, c.Name)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", c.Name, percent(c.Share)))
	}
	return strings.Join(parts, ", ")
}

// percent writes a share as a percentage with up to two decimals.
func percent(s float64) string {
	t := strconv.FormatFloat(s*100, 'f', 2, 64)
	t = strings.TrimRight(strings.TrimRight(t, "0"), ".")
	return t + "%"
}

// clusterShare is a cluster with its share and endpoints.
func clusterShare(res *Resources, name string, weight uint32, sh float64, grpc bool, n *notes) ClusterShare {
	cs := ClusterShare{Name: name, Weight: weight, Share: sh, ServingPriority: -1}
	c := res.Clusters[name]
	if c == nil {
		cs.Missing = true
		return cs
	}
	var cla *endpointv3.ClusterLoadAssignment
	switch t := c.GetClusterDiscoveryType().(type) {
	case *clusterv3.Cluster_Type:
		cs.Type = t.Type.String()
		if t.Type == clusterv3.Cluster_EDS {
			svc := c.GetEdsClusterConfig().GetServiceName()
			if svc == "" {
				svc = name
			}
			cla = res.Endpoints[svc]
		} else {
			cla = c.GetLoadAssignment()
		}
		if t.Type == clusterv3.Cluster_STRICT_DNS || t.Type == clusterv3.Cluster_LOGICAL_DNS {
			n.add("DNS resolution of cluster %s's hosts", name)
		}
	case *clusterv3.Cluster_ClusterType:
		cs.Type = t.ClusterType.GetName()
		n.add("cluster type %s of cluster %s (endpoints not simulated)", t.ClusterType.GetName(), name)
	}
	cs.Endpoints, cs.ServingPriority = endpoints(cla, grpc)
	if grpc && dropped(cla) {
		n.add("cluster %s has localities without load_balancing_weight: gRPC clients drop them (shown as not serving)", name)
	}
	return cs
}

// dropped reports whether an assignment has a locality without a weight.
func dropped(cla *endpointv3.ClusterLoadAssignment) bool {
	for _, le := range cla.GetEndpoints() {
		if le.GetLoadBalancingWeight().GetValue() == 0 {
			return true
		}
	}
	return false
}

// endpoints lists an assignment's endpoints and marks those traffic goes
// to: healthy or unknown health, at the lowest priority that has any
// (priority spill-over by the overprovisioning factor is not simulated).
// For gRPC, a locality without a weight takes nothing (grpc-go drops it).
func endpoints(cla *endpointv3.ClusterLoadAssignment, grpc bool) ([]Endpoint, int) {
	var out []Endpoint
	serving := -1
	for _, le := range cla.GetEndpoints() {
		gone := grpc && le.GetLoadBalancingWeight().GetValue() == 0
		for _, e := range le.GetLbEndpoints() {
			ep := Endpoint{
				Address: address(e.GetEndpoint().GetAddress()), Priority: le.GetPriority(),
				Region: le.GetLocality().GetRegion(), Zone: le.GetLocality().GetZone(), SubZone: le.GetLocality().GetSubZone(),
				Health: e.GetHealthStatus().String(), Weight: max(e.GetLoadBalancingWeight().GetValue(), 1),
				LocalityWeight: le.GetLoadBalancingWeight().GetValue(),
			}
			if !gone && healthy(e.GetHealthStatus()) && (serving < 0 || int(le.GetPriority()) < serving) {
				serving = int(le.GetPriority())
			}
			out = append(out, ep)
		}
	}
	for i := range out {
		e := &out[i]
		gone := grpc && e.LocalityWeight == 0
		e.Serving = !gone && int(e.Priority) == serving && healthy(corev3.HealthStatus(corev3.HealthStatus_value[e.Health]))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out, serving
}

func healthy(h corev3.HealthStatus) bool {
	return h == corev3.HealthStatus_UNKNOWN || h == corev3.HealthStatus_HEALTHY
}

func address(a *corev3.Address) string {
	if sa := a.GetSocketAddress(); sa != nil {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	if p := a.GetPipe(); p != nil {
		return "unix:" + p.GetPath()
	}
	return "(unknown address)"
}

// redirectLocation builds the Location of a redirect as Envoy does: the
// scheme, host, port and path each replaced when the action says so.
func redirectLocation(rd *routev3.RedirectAction, rm *routev3.RouteMatch, req *Request, m *matcher) (string, error) {
	scheme := req.Scheme
	switch s := rd.GetSchemeRewriteSpecifier().(type) {
	case *routev3.RedirectAction_HttpsRedirect:
		if s.HttpsRedirect {
			scheme = "https"
		}
	case *routev3.RedirectAction_SchemeRedirect:
		scheme = strings.ToLower(s.SchemeRedirect)
	}
	host, port := req.host()
	switch {
	case rd.GetHostRedirect() != "":
		host, port = rd.GetHostRedirect(), 0
	case (scheme == "https" && port == 80) || (scheme == "http" && port == 443):
		port = 0 // the old scheme's default port does not carry over
	}
	if rd.GetPortRedirect() != 0 {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		port = rd.GetPortRedirect()
	}
	if port != 0 {
		host = net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
	}
	path, err := redirectPath(rd, rm, req, m)
	return scheme + "://" + host + path, err
}

// redirectPath is the redirect's path and query.
func redirectPath(rd *routev3.RedirectAction, rm *routev3.RouteMatch, req *Request, m *matcher) (string, error) {
	path, query, _ := strings.Cut(req.Path, "?")
	switch p := rd.GetPathRewriteSpecifier().(type) {
	case *routev3.RedirectAction_PathRedirect:
		// A query in path_redirect replaces the request's.
		if pp, q, ok := strings.Cut(p.PathRedirect, "?"); ok {
			return pp + "?" + q, nil
		}
		path = p.PathRedirect
	case *routev3.RedirectAction_PrefixRewrite:
		if pre := rm.GetPrefix(); pre != "" || rm.GetPathSeparatedPrefix() != "" {
			pre += rm.GetPathSeparatedPrefix()
			path = p.PrefixRewrite + path[min(len(pre), len(path)):]
		}
	case *routev3.RedirectAction_RegexRewrite:
		pat := p.RegexRewrite.GetPattern().GetRegex()
		if len(pat) > maxRegexBytes {
			return path, fmt.Errorf("regex_rewrite pattern over the %d byte limit", maxRegexBytes)
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return path, fmt.Errorf("regex_rewrite %q: %v", short(pat), err)
		}
		path = re.ReplaceAllString(path, envoySubstitution(p.RegexRewrite.GetSubstitution()))
	}
	if rd.GetStripQuery() || query == "" {
		return path, nil
	}
	return path + "?" + query, nil
}

// backref is a \N reference in an Envoy regex substitution.
var backref = regexp.MustCompile(`\\([0-9])`)

// envoySubstitution turns Envoy's \1 references into Go's ${1}.
func envoySubstitution(s string) string {
	return backref.ReplaceAllString(strings.ReplaceAll(s, "$", "$$"), "$${$1}")
}

// describeMatch writes a route match as the config says it, for people.
func describeMatch(rm *routev3.RouteMatch) string {
	var parts []string
	switch p := rm.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		parts = append(parts, fmt.Sprintf("prefix %q", p.Prefix))
	case *routev3.RouteMatch_Path:
		parts = append(parts, fmt.Sprintf("path %q", p.Path))
	case *routev3.RouteMatch_SafeRegex:
		parts = append(parts, fmt.Sprintf("regex %q", p.SafeRegex.GetRegex()))
	case *routev3.RouteMatch_PathSeparatedPrefix:
		parts = append(parts, fmt.Sprintf("path_separated_prefix %q", p.PathSeparatedPrefix))
	case *routev3.RouteMatch_ConnectMatcher_:
		parts = append(parts, "CONNECT")
	}
	if cs := rm.GetCaseSensitive(); cs != nil && !cs.GetValue() {
		parts = append(parts, "case-insensitive")
	}
	for _, h := range rm.GetHeaders() {
		parts = append(parts, "header "+describeHeader(h))
	}
	for _, q := range rm.GetQueryParameters() {
		parts = append(parts, "query "+q.GetName())
	}
	return strings.Join(parts, ", ")
}

func describeHeader(h *routev3.HeaderMatcher) string {
	not := ""
	if h.GetInvertMatch() {
		not = "not "
	}
	var what string
	if sm := legacyString(h); sm != nil {
		return h.GetName() + " " + not + describeString(sm)
	}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_RangeMatch:
		what = fmt.Sprintf("in [%d,%d)", s.RangeMatch.GetStart(), s.RangeMatch.GetEnd())
	case *routev3.HeaderMatcher_PresentMatch:
		what = "present"
		if !s.PresentMatch {
			what = "absent"
		}
	case *routev3.HeaderMatcher_StringMatch:
		what = describeString(s.StringMatch)
	}
	return h.GetName() + " " + not + what
}

func describeString(sm *matcherv3.StringMatcher) string {
	var what string
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		what = fmt.Sprintf("= %q", p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		what = fmt.Sprintf("prefix %q", p.Prefix)
	case *matcherv3.StringMatcher_Suffix:
		what = fmt.Sprintf("suffix %q", p.Suffix)
	case *matcherv3.StringMatcher_Contains:
		what = fmt.Sprintf("contains %q", p.Contains)
	case *matcherv3.StringMatcher_SafeRegex:
		what = fmt.Sprintf("regex %q", p.SafeRegex.GetRegex())
	case *matcherv3.StringMatcher_Custom:
		what = "custom " + p.Custom.GetName()
	}
	if sm.GetIgnoreCase() {
		what += " (any case)"
	}
	return what
}
