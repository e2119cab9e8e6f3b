package route

import (
	"context"
	"fmt"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

const (
	hcmName      = "envoy.filters.network.http_connection_manager"
	tcpProxyName = "envoy.filters.network.tcp_proxy"
	routerName   = "envoy.filters.http.router"
)

// Explain says where req goes on a node running res. The error is for a
// request that never reaches HTTP routing: no listener, no filter chain
// (Envoy closes the connection), a route configuration the node does not
// have, or a matcher Envoy would have refused.
func Explain(res *Resources, req Request) (*Result, error) {
	return ExplainContext(context.Background(), res, req)
}

// ctxEvery is how many routes are tried between two looks at the context:
// often enough to stop within a few milliseconds on thousands of regex
// routes, rarely enough to cost nothing.
const ctxEvery = 32

// ExplainContext is Explain that gives up once ctx is done, with an error
// wrapping ctx's: route tests run under a time budget, and one request
// walking thousands of regex routes must not outlast it.
func ExplainContext(ctx context.Context, res *Resources, req Request) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := &notes{}
	out := &Result{Request: req}
	l, lm, err := findListener(res, &req)
	if err != nil {
		return nil, err
	}
	out.Listener = lm
	var filters []*listenerv3.Filter
	if api := l.GetApiListener(); api != nil {
		filters = []*listenerv3.Filter{{Name: hcmName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: api.GetApiListener()}}}
	} else {
		ch, why, err := selectChain(l, chainInputOf(l, &req), n)
		if err != nil {
			return nil, err
		}
		lm.FilterChain, lm.ChainMatch = ch.label, why
		filters = ch.fc.GetFilters()
	}
	if err := explainFilters(ctx, res, l, &req, filters, out, n); err != nil {
		return nil, err
	}
	out.NotSimulated = n.list
	return out, nil
}

func chainInputOf(l *listenerv3.Listener, req *Request) chainInput {
	port, _ := req.destPort()
	in := chainInput{port: port, transport: "raw_buffer"}
	if req.Scheme == "https" {
		in.transport = "tls"
		in.sni = req.SNI
		if in.sni == "" {
			in.sni, _ = req.host()
		}
		if !hasTLSInspector(l) {
			// Without the inspector Envoy never reads the SNI.
			in.sni = ""
		}
	}
	return in
}

// explainFilters follows the network filters to the one that decides: the
// HTTP connection manager or a TCP proxy.
func explainFilters(ctx context.Context, res *Resources, l *listenerv3.Listener, req *Request, filters []*listenerv3.Filter, out *Result, n *notes) error {
	for _, f := range filters {
		tc := f.GetTypedConfig()
		switch {
		case f.GetName() == hcmName || strings.HasSuffix(tc.GetTypeUrl(), ".HttpConnectionManager"):
			hcm := &hcmv3.HttpConnectionManager{}
			if err := tc.UnmarshalTo(hcm); err != nil {
				return fmt.Errorf("listener %q: http_connection_manager: %v", l.GetName(), err)
			}
			return explainHTTP(ctx, res, l, req, hcm, out, n)
		case f.GetName() == tcpProxyName || strings.HasSuffix(tc.GetTypeUrl(), ".TcpProxy"):
			tp := &tcpproxyv3.TcpProxy{}
			if err := tc.UnmarshalTo(tp); err != nil {
				return fmt.Errorf("listener %q: tcp_proxy: %v", l.GetName(), err)
			}
			explainTCP(res, tp, out, n)
			return nil
		default:
			n.add("network filter %s (may change or end the connection; passed through)", f.GetName())
		}
	}
	return fmt.Errorf("listener %q: the filter chain has no http_connection_manager or tcp_proxy", l.GetName())
}

// explainTCP is a TCP proxy: the connection goes to its cluster(s).
func explainTCP(res *Resources, tp *tcpproxyv3.TcpProxy, out *Result, n *notes) {
	out.Action = "tcp_proxy"
	if wc := tp.GetWeightedClusters(); wc != nil {
		var total uint64
		for _, c := range wc.GetClusters() {
			total += uint64(c.GetWeight())
		}
		for _, c := range wc.GetClusters() {
			out.Clusters = append(out.Clusters, clusterShare(res, c.GetName(), c.GetWeight(), share(c.GetWeight(), total), false, n))
		}
	} else {
		out.Clusters = []ClusterShare{clusterShare(res, tp.GetCluster(), 0, 1, false, n)}
	}
	out.Outcome = "TCP proxy to " + clusterList(out.Clusters)
}

// explainHTTP routes the request with the connection manager's routes.
func explainHTTP(ctx context.Context, res *Resources, l *listenerv3.Listener, req *Request, hcm *hcmv3.HttpConnectionManager, out *Result, n *notes) error {
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() != routerName && !strings.HasSuffix(f.GetTypedConfig().GetTypeUrl(), ".router.v3.Router") {
			n.add("HTTP filter %s (may rewrite or answer the request; passed through)", f.GetName())
		}
	}
	var rc *routev3.RouteConfiguration
	switch s := hcm.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		name := s.Rds.GetRouteConfigName()
		if rc = res.Routes[name]; rc == nil {
			return fmt.Errorf("listener %q names RouteConfiguration %q over RDS, which this node does not have", l.GetName(), name)
		}
		out.RouteConfig, out.RouteConfigFrom = name, "rds"
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rc = s.RouteConfig
		out.RouteConfig, out.RouteConfigFrom = rc.GetName(), "inline"
	default:
		return fmt.Errorf("listener %q uses scoped_routes, which is not simulated", l.GetName())
	}
	host := req.Authority
	if _, port := req.host(); port != 0 && (rc.GetIgnorePortInHostMatching() || hcm.GetStripAnyHostPort() ||
		(hcm.GetStripMatchingHostPort() && out.Listener.Port == port)) {
		host, _ = req.host()
	}
	if req.GRPC {
		out.GRPCNACK = append(GRPCListenerRejects(l.GetName(), hcm), GRPCRejects(rc)...)
	}
	m := newMatcher(n, req.GRPC, res.regex)
	return routeIn(ctx, res, rc, host, req, m, out)
}

// routeIn finds the virtual host and the first route that matches.
func routeIn(ctx context.Context, res *Resources, rc *routev3.RouteConfiguration, host string, req *Request, m *matcher, out *Result) error {
	vh, vm := findVirtualHost(rc, host)
	if vh == nil {
		out.Action = "none"
		return noRoute(out, req, fmt.Sprintf("no virtual host of %s matches host %q", rc.GetName(), host))
	}
	out.VirtualHost = vm
	for i, r := range vh.GetRoutes() {
		if i%ctxEvery == ctxEvery-1 && ctx.Err() != nil {
			return fmt.Errorf("stopped at route %s of virtual host %s: %w", routeID(r, i), vh.GetName(), ctx.Err())
		}
		if req.GRPC && len(r.GetMatch().GetQueryParameters()) > 0 {
			m.notes.add("a route with query_parameters (gRPC clients skip such routes, gRFC A28)")
			continue
		}
		ok, err := m.routeMatch(r.GetMatch(), req)
		if err != nil {
			return fmt.Errorf("RouteConfiguration %s, virtual host %s, route %s: %v", rc.GetName(), vh.GetName(), routeID(r, i), err)
		}
		if ok {
			out.Route = &RouteRef{ID: routeID(r, i), Index: i, Name: r.GetName(), Match: describeMatch(r.GetMatch())}
			applyAction(res, r, req, m, out)
			return nil
		}
	}
	out.Action = "none"
	return noRoute(out, req, fmt.Sprintf("no route of virtual host %s matches", vh.GetName()))
}

// noRoute is the answer to a request nothing routes: Envoy's 404, a gRPC
// client's UNAVAILABLE.
func noRoute(out *Result, req *Request, why string) error {
	if req.GRPC {
		out.GRPCStatus = "UNAVAILABLE"
		out.Outcome = why + ": the RPC fails with UNAVAILABLE"
		return nil
	}
	out.Status = 404
	out.Outcome = why + ": the proxy answers 404"
	return nil
}

// findVirtualHost picks the virtual host for host as Envoy (and grpc-go)
// do: an exact domain, then suffix wildcards ("*.example.com",
// "*-bar.example.com") longest first, then prefix wildcards ("foo.*")
// longest first, then "*". Matching ignores case; a wildcard never matches
// an empty part.
func findVirtualHost(rc *routev3.RouteConfiguration, host string) (*routev3.VirtualHost, *VHostMatch) {
	host = strings.ToLower(host)
	type hit struct {
		vh     *routev3.VirtualHost
		domain string
	}
	var suffix, prefix, any *hit
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			ld := strings.ToLower(d)
			switch {
			case ld == "*":
				if any == nil {
					any = &hit{vh, d}
				}
			case ld == host:
				return vh, &VHostMatch{Name: vh.GetName(), Domain: d, Kind: "exact", Host: host}
			case strings.HasPrefix(ld, "*") && len(host) > len(ld)-1 && strings.HasSuffix(host, ld[1:]):
				if suffix == nil || len(ld) > len(suffix.domain) {
					suffix = &hit{vh, d}
				}
			case strings.HasSuffix(ld, "*") && len(host) > len(ld)-1 && strings.HasPrefix(host, ld[:len(ld)-1]):
				if prefix == nil || len(ld) > len(prefix.domain) {
					prefix = &hit{vh, d}
				}
			}
		}
	}
	for _, h := range []struct {
		hit  *hit
		kind string
	}{{suffix, "suffix wildcard"}, {prefix, "prefix wildcard"}, {any, "any (*)"}} {
		if h.hit != nil {
			return h.hit.vh, &VHostMatch{Name: h.hit.vh.GetName(), Domain: h.hit.domain, Kind: h.kind, Host: host}
		}
	}
	return nil, nil
}
