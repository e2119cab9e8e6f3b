package grpcrules

import (
	"fmt"
	"math"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// routes checks a RouteConfiguration, on its own (prefix "") or inline in
// an HttpConnectionManager, of a server's with server.
func (c *checker) routes(prefix string, rc *routev3.RouteConfiguration, server bool) {
	plugins := map[string]bool{}
	for _, p := range rc.GetClusterSpecifierPlugins() {
		plugins[p.GetExtension().GetName()] = true
	}
	for i, vh := range rc.GetVirtualHosts() {
		vf := join(prefix, fmt.Sprintf("virtual_hosts[%d]", i))
		c.retry(vf+".retry_policy", vh.GetRetryPolicy())
		for j, r := range vh.GetRoutes() {
			f := fmt.Sprintf("%s.routes[%d]", vf, j)
			if server {
				c.serverRoute(f, r)
				continue
			}
			c.route(f, r, plugins)
		}
	}
}

func (c *checker) route(field string, r *routev3.Route, plugins map[string]bool) {
	switch r.GetMatch().GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix, *routev3.RouteMatch_Path, *routev3.RouteMatch_SafeRegex:
	default:
		c.add("route-path", nil, field+".match", "gRPC clients match the method path by prefix, path or safe_regex only")
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		c.action(field+".route", a.Route, plugins)
	case *routev3.Route_NonForwardingAction:
		// An xDS-enabled server's route (gRFC A36).
	default:
		f := field
		switch r.GetAction().(type) {
		case *routev3.Route_Redirect:
			f += ".redirect"
		case *routev3.Route_DirectResponse:
			f += ".direct_response"
		}
		c.add("route-action", nil, f, "not a route action gRPC clients implement: the RPCs it matches fail; route them to a cluster")
		c.add("route-action-nack", nil, f, "not a route action gRPC clients implement; route RPCs to a cluster")
	}
}

// serverRoute checks a server's route: grpc-go fails the RPCs a route
// matches unless it is non_forwarding_action (the server serves them).
func (c *checker) serverRoute(field string, r *routev3.Route) {
	switch r.GetMatch().GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix, *routev3.RouteMatch_Path, *routev3.RouteMatch_SafeRegex:
	default:
		c.add("route-path", nil, field+".match", "gRPC servers match the method path by prefix, path or safe_regex only")
	}
	if _, ok := r.GetAction().(*routev3.Route_NonForwardingAction); !ok {
		c.add("server-route-action", nil, field, "not non_forwarding_action: a gRPC server fails the RPCs this route matches (UNAVAILABLE); say non_forwarding_action: {}")
	}
}

func (c *checker) action(field string, a *routev3.RouteAction, plugins map[string]bool) {
	switch cs := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_WeightedClusters:
		var total uint64
		for _, w := range cs.WeightedClusters.GetClusters() {
			total += uint64(w.GetWeight().GetValue())
		}
		switch {
		case total == 0:
			c.add("route-weights", nil, field+".weighted_clusters", "the weights sum to zero: gRPC clients have no cluster to send to")
		case total > math.MaxUint32:
			c.add("route-weights", nil, field+".weighted_clusters", "the weights sum to %d, over %d", total, uint64(math.MaxUint32))
		}
	case *routev3.RouteAction_ClusterSpecifierPlugin:
		if !plugins[cs.ClusterSpecifierPlugin] {
			c.add("route-plugin", nil, field+".cluster_specifier_plugin", "%q is not one of the RouteConfiguration's cluster_specifier_plugins", cs.ClusterSpecifierPlugin)
		}
	}
	c.retry(field+".retry_policy", a.GetRetryPolicy())
}

// retry checks a retry policy as gRPC clients read it (gRFC A44).
func (c *checker) retry(field string, p *routev3.RetryPolicy) {
	if p == nil {
		return
	}
	if n := p.GetNumRetries(); n != nil && n.GetValue() < 1 {
		c.add("route-retry", nil, field+".num_retries", "0: gRPC clients want at least 1 (leave it unset for 1)")
	}
	if b := p.GetRetryBackOff(); b != nil {
		if d := b.GetBaseInterval(); d != nil && d.AsDuration() <= 0 {
			c.add("route-retry", nil, field+".retry_back_off.base_interval", "must be above zero")
		}
		if d := b.GetMaxInterval(); d != nil && d.AsDuration() <= 0 {
			c.add("route-retry", nil, field+".retry_back_off.max_interval", "must be above zero")
		}
	}
}
