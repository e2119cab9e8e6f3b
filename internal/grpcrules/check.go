package grpcrules

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Check returns the rules msg breaks for the given clients: nothing for a
// type gRPC clients read no rule of, or for clients it does not know.
func Check(msg proto.Message, clients []Client) []Problem {
	c := &checker{clients: clients}
	switch m := msg.(type) {
	case *listenerv3.Listener:
		c.listener(m)
	case *routev3.RouteConfiguration:
		c.routes("", m, false)
	case *clusterv3.Cluster:
		c.cluster(m)
	case *endpointv3.ClusterLoadAssignment:
		c.endpoints(m)
	}
	return c.problems
}

type checker struct {
	clients  []Client
	problems []Problem
}

// add reports rule id for those of refusing that the rule holds for and
// that are checked; nil refusing is every client the rule holds for.
func (c *checker) add(id string, refusing []Client, field, format string, args ...any) {
	r := rule(id)
	if refusing == nil {
		refusing = r.Clients
	}
	var who []Client
	for _, cl := range All {
		if slices.Contains(c.clients, cl) && slices.Contains(refusing, cl) && slices.Contains(r.Clients, cl) {
			who = append(who, cl)
		}
	}
	if len(who) == 0 {
		return
	}
	c.problems = append(c.problems, Problem{Rule: r, Clients: who, Field: field, Message: fmt.Sprintf(format, args...)})
}

// join names a field under prefix.
func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

func (c *checker) listener(l *listenerv3.Listener) {
	api := l.GetApiListener()
	if api == nil {
		if l.GetAddress() == nil {
			c.add("listener-kind", nil, "api_listener", "missing: a gRPC client reads a Listener with an api_listener (an xDS-enabled server, one with an address)")
			return
		}
		c.serverListener(l)
		return
	}
	const field = "api_listener.api_listener"
	hcm := &hcmv3.HttpConnectionManager{}
	if api.GetApiListener() == nil || !api.GetApiListener().MessageIs(hcm) || api.GetApiListener().UnmarshalTo(hcm) != nil {
		c.add("listener-hcm", nil, field, "%q is not an HttpConnectionManager", api.GetApiListener().GetTypeUrl())
		return
	}
	c.hcm(field, hcm, false)
}

// hcm checks an HttpConnectionManager of a client's api_listener or, with
// server, of a server's filter chain.
func (c *checker) hcm(field string, h *hcmv3.HttpConnectionManager, server bool) {
	if h.GetXffNumTrustedHops() != 0 {
		c.add("hcm-unsupported-value", nil, join(field, "xff_num_trusted_hops"), "must be zero for gRPC clients")
	}
	if len(h.GetOriginalIpDetectionExtensions()) > 0 {
		c.add("hcm-unsupported-value", nil, join(field, "original_ip_detection_extensions"), "must be empty for gRPC clients")
	}
	switch rs := h.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		if src := rs.Rds.GetConfigSource(); src.GetAds() == nil && src.GetSelf() == nil {
			c.add("hcm-routes", nil, join(field, "rds.config_source"), "gRPC clients fetch routes over the stream they have: say ads: {} (or self: {})")
		}
	case *hcmv3.HttpConnectionManager_RouteConfig:
		c.routes(join(field, "route_config"), rs.RouteConfig, server)
	default:
		c.add("hcm-routes", nil, field, "gRPC clients read routes from rds or route_config only (scoped routes are not implemented)")
	}
	c.filters(join(field, "http_filters"), h.GetHttpFilters(), server)
	if server {
		for i, f := range h.GetHttpFilters() {
			cfg := &rbacfilterv3.RBAC{}
			if f.GetTypedConfig().MessageIs(cfg) && f.GetTypedConfig().UnmarshalTo(cfg) == nil {
				c.serverRBAC(fmt.Sprintf("%s.http_filters[%d].typed_config", field, i), cfg)
			}
		}
	}
}

// The HTTP filters' type URLs gRPC clients know.
const (
	typeRouter   = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	typeFault    = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
	typeRBAC     = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
	typeSession  = "type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession"
	typeGCPAuthn = "type.googleapis.com/envoy.extensions.filters.http.gcp_authn.v3.GcpAuthnFilterConfig"
	typeStructV3 = "type.googleapis.com/xds.type.v3.TypedStruct"
	typeStructV1 = "type.googleapis.com/udpa.type.v1.TypedStruct"
)

// clientFilters and serverFilters are the HTTP filters each client
// implements, at the version in Versions, on a channel and on an
// xDS-enabled server (gRFC A39, A33, A41; grpc-go's ext_proc and ext_authz
// are off by default; C-core's stateful_session, A55, came in 1.61, after
// the 1.51 tested here).
var (
	clientFilters = map[Client][]string{
		Go:   {typeRouter, typeFault, typeGCPAuthn},
		Core: {typeRouter, typeFault},
		JS:   {typeRouter, typeFault},
	}
	serverFilters = map[Client][]string{
		Go:   {typeRouter, typeRBAC},
		Core: {typeRouter, typeRBAC},
		// grpc-js 1.14 registers its RBAC filter only with
		// GRPC_XDS_EXPERIMENTAL_RBAC=true, which Pylon cannot see.
		JS: {typeRouter},
	}
)

// filters checks an HTTP filter list for each client: the filters it does
// not implement must be optional, and of those it keeps the router must be
// last and only last.
func (c *checker) filters(field string, fs []*hcmv3.HttpFilter, server bool) {
	known := clientFilters
	side := "client"
	if server {
		known, side = serverFilters, "server"
	}
	unknown := map[int][]Client{}
	last := map[string][]Client{} // a problem's field and message: who has it
	var order []string
	for _, cl := range All {
		impl, ok := known[cl]
		if !ok || !slices.Contains(c.clients, cl) {
			continue
		}
		var kept []int
		for i, f := range fs {
			if slices.Contains(impl, filterType(f.GetTypedConfig().GetTypeUrl(), f.GetTypedConfig().GetValue())) {
				kept = append(kept, i)
			} else if !f.GetIsOptional() {
				unknown[i] = append(unknown[i], cl)
			}
		}
		key := routerProblem(field, fs, kept)
		if key == "" {
			continue
		}
		if _, seen := last[key]; !seen {
			order = append(order, key)
		}
		last[key] = append(last[key], cl)
	}
	for i, f := range fs {
		if who := unknown[i]; len(who) > 0 {
			advice := "mark it is_optional: true, or scope it away from the group"
			if filterType(f.GetTypedConfig().GetTypeUrl(), f.GetTypedConfig().GetValue()) == typeRBAC {
				// An optional RBAC filter is skipped: the servers would
				// serve every caller.
				advice = "an is_optional RBAC filter would be skipped, serving every caller: run servers that enforce RBAC, or leave it out for this group"
			}
			c.add("hcm-filter-unknown", who, fmt.Sprintf("%s[%d].typed_config", field, i),
				"filter %q (%s) is not one they implement on the %s side; %s", f.GetName(), f.GetTypedConfig().GetTypeUrl(), side, advice)
		}
	}
	for _, key := range order {
		f, msg, _ := strings.Cut(key, "\x00")
		c.add("hcm-router-last", last[key], f, "%s", msg)
	}
}

// routerProblem says what is wrong with the filters a client keeps (their
// indexes in fs): the field and message joined by a NUL, or "".
func routerProblem(field string, fs []*hcmv3.HttpFilter, kept []int) string {
	if len(kept) == 0 {
		return field + "\x00no filter they implement: the router must be the last filter"
	}
	for _, i := range kept[:len(kept)-1] {
		if filterType(fs[i].GetTypedConfig().GetTypeUrl(), fs[i].GetTypedConfig().GetValue()) == typeRouter {
			return fmt.Sprintf("%s[%d]\x00the router %q is not the last filter", field, i, fs[i].GetName())
		}
	}
	if l := fs[kept[len(kept)-1]]; filterType(l.GetTypedConfig().GetTypeUrl(), l.GetTypedConfig().GetValue()) != typeRouter {
		return fmt.Sprintf("%s\x00the last filter, %q, is not the router; the router must be last", field, l.GetName())
	}
	return ""
}

// filterType is a filter config's type, read through a TypedStruct.
func filterType(url string, value []byte) string {
	if url != typeStructV3 && url != typeStructV1 {
		return url
	}
	// TypedStruct's type_url is its field 1; read without the cncf/xds
	// module, which Pylon does not import.
	for len(value) > 0 {
		num, typ, n := protowire.ConsumeTag(value)
		if n < 0 {
			return url
		}
		value = value[n:]
		if num == 1 && typ == protowire.BytesType {
			b, m := protowire.ConsumeBytes(value)
			if m < 0 {
				return url
			}
			return string(b)
		}
		m := protowire.ConsumeFieldValue(num, typ, value)
		if m < 0 {
			return url
		}
		value = value[m:]
	}
	return url
}

func (c *checker) cluster(cl *clusterv3.Cluster) {
	c.lbPolicy(cl)
	switch {
	case cl.GetClusterType() != nil:
		if cl.GetClusterType().GetName() != "envoy.clusters.aggregate" {
			c.add("cluster-type", nil, "cluster_type.name", "%q is not a cluster type gRPC clients implement (envoy.clusters.aggregate is)", cl.GetClusterType().GetName())
		}
	case cl.GetType() == clusterv3.Cluster_EDS:
		if src := cl.GetEdsClusterConfig().GetEdsConfig(); src.GetAds() == nil && src.GetSelf() == nil {
			c.add("cluster-type", nil, "eds_cluster_config.eds_config", "gRPC clients fetch endpoints over the stream they have: say ads: {} (or self: {})")
		}
	case cl.GetType() == clusterv3.Cluster_LOGICAL_DNS:
		eps := cl.GetLoadAssignment().GetEndpoints()
		if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
			c.add("cluster-logical-dns", nil, "load_assignment", "a LOGICAL_DNS cluster for gRPC clients has one locality with one endpoint, the name to resolve")
		}
		c.add("cluster-logical-dns-core", nil, "type", "LOGICAL_DNS: C-core 1.51.1 exits with SIGSEGV when an aggregate cluster fails back from it to an EDS cluster; use EDS for this group")
	default:
		c.add("cluster-type", nil, "type", "%s is not a cluster type gRPC clients implement (EDS, LOGICAL_DNS, or an aggregate cluster)", cl.GetType())
	}
	if lrs := cl.GetLrsServer(); lrs != nil && lrs.GetSelf() == nil {
		c.add("cluster-lrs", nil, "lrs_server", "gRPC clients report load only to the server they have: say self: {}")
	}
	c.tls(cl)
	if od := cl.GetOutlierDetection(); od != nil && (od.GetEnforcingSuccessRate() == nil || od.GetEnforcingSuccessRate().GetValue() > 0) &&
		(od.GetSuccessRateMinimumHosts() == nil || od.GetSuccessRateRequestVolume() == nil) {
		c.add("cluster-outlier-defaults", nil, "outlier_detection", "success rate ejection is on and success_rate_minimum_hosts or success_rate_request_volume is unset; write both (Envoy's defaults: 5 and 100), or enforcing_success_rate: 0")
	}
}

// lbPolicies are the lb_policy values each client implements.
var lbPolicies = map[Client][]clusterv3.Cluster_LbPolicy{
	Go:   {clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_RING_HASH, clusterv3.Cluster_LEAST_REQUEST},
	Core: {clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_RING_HASH},
	JS:   {clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_RING_HASH},
}

func (c *checker) lbPolicy(cl *clusterv3.Cluster) {
	if lbp := cl.GetLoadBalancingPolicy(); lbp != nil {
		// gRPC clients read it in place of lb_policy (gRFC A52).
		c.lbConfig("load_balancing_policy", lbp, cl.GetLbPolicy())
		return
	}
	p := cl.GetLbPolicy()
	var lacking []Client
	for _, client := range All {
		if !slices.Contains(lbPolicies[client], p) {
			lacking = append(lacking, client)
		}
	}
	if len(lacking) > 0 {
		c.add("cluster-lb-policy", lacking, "lb_policy", "%s is not an LB policy they implement; they NACK the whole CDS response that carries it", p)
	}
	if p == clusterv3.Cluster_RING_HASH {
		c.add("cluster-ring-hash-core", nil, "lb_policy", "RING_HASH: C-core 1.51.1 serves no RPC over it (they wait out their deadline, or the client exits with SIGSEGV); use ROUND_ROBIN for this group")
		if f := cl.GetRingHashLbConfig().GetHashFunction(); f != clusterv3.Cluster_RingHashLbConfig_XX_HASH {
			c.add("cluster-ring-hash", nil, "ring_hash_lb_config.hash_function", "%s: gRPC clients hash with XX_HASH only", f)
		}
	}
}

// tls refuses certificates over SDS: gRPC clients take them from
// certificate provider instances named in their bootstrap (gRFC A29).
func (c *checker) tls(cl *clusterv3.Cluster) {
	if len(cl.GetTransportSocketMatches()) > 0 {
		c.add("cluster-socket-matches", nil, "transport_socket_matches", "not supported by grpc-go; leave it empty")
	}
	up := &tlsv3.UpstreamTlsContext{}
	ts := cl.GetTransportSocket().GetTypedConfig()
	if ts == nil || !ts.MessageIs(up) || ts.UnmarshalTo(up) != nil {
		return
	}
	common := up.GetCommonTlsContext()
	if len(common.GetTlsCertificateSdsSecretConfigs()) > 0 || common.GetValidationContextSdsSecretConfig() != nil ||
		common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig() != nil {
		c.add("cluster-tls", nil, "transport_socket.typed_config.common_tls_context", "certificates over SDS: gRPC clients take them from certificate provider instances named in their bootstrap (gRFC A29)")
	}
}
