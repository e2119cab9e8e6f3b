package translate

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/model"
)

// GRPCServerListenerTemplate names the Listener an xDS-enabled gRPC server
// fetches, %s the address it serves on: the default of grpc-go and C-core,
// and what `pylon bootstrap --grpc --server` writes.
const GRPCServerListenerTemplate = "grpc/server?xds.resource.listening_address=%s"

// DefaultCertificateProvider is the certificate provider instance TLS for
// proxyless gRPC uses when the model names none: the one `pylon bootstrap
// --grpc --cert-dir` writes.
const DefaultCertificateProvider = "default"

// The RBAC filters of a server's HTTP connection manager: deny first, so
// that an RPC both match is refused.
const (
	RBACDenyFilter  = "envoy.filters.http.rbac.deny"
	RBACAllowFilter = "envoy.filters.http.rbac.allow"
)

// GRPCServerListenerName is the name of the Listener of servers listening
// on listen (host:port): the address as grpc-go formats it, IPv6 in
// brackets.
func GRPCServerListenerName(listen string) string {
	return fmt.Sprintf(GRPCServerListenerTemplate, listen)
}

// GRPCServerListener is the Listener of a target's xDS-enabled servers
// (gRFC A36), as grpc-go's processServerSideListener reads it: the address,
// one filter chain that matches every connection, with the server's TLS
// and an HTTP connection manager whose inline routes take every RPC with
// non_forwarding_action (the server serves it itself), RBAC filters, and
// the router last. Nil for a target without servers.
func GRPCServerListener(g *model.GRPCTarget) *listenerv3.Listener {
	s := g.Server
	if s == nil {
		return nil
	}
	host, port := splitListen(s.Listen)
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: g.Target,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: g.Target,
			VirtualHosts: []*routev3.VirtualHost{{
				Name: g.Target,
				// A server's clients dial it by any name.
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
					Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
				}},
			}},
		}},
	}
	h.HttpFilters = append(rbacFilters(s.RBAC), &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&routerv3.Router{})}})
	chain := &listenerv3.FilterChain{
		Name:    g.Target,
		Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(h)}}},
	}
	if s.TLS != nil {
		chain.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(serverTLS(s.TLS))}}
	}
	return &listenerv3.Listener{
		Name:         GRPCServerListenerName(s.Listen),
		Address:      socket(host, port),
		FilterChains: []*listenerv3.FilterChain{chain},
	}
}

// splitListen splits host:port, an IPv6 host in brackets; a malformed
// address (refused by the model's checks, translated all the same) gives
// what it can.
func splitListen(listen string) (string, uint32) {
	i := strings.LastIndexByte(listen, ':')
	if i < 0 {
		return listen, 0
	}
	port, err := strconv.ParseUint(listen[i+1:], 10, 16)
	if err != nil {
		port = 0
	}
	return strings.TrimSuffix(strings.TrimPrefix(listen[:i], "["), "]"), uint32(port)
}

// serverTLS is a server's DownstreamTlsContext from certificate provider
// instances (gRFC A29): its own certificate, and the CA that verifies its
// clients', whose certificate it requires unless told otherwise.
func serverTLS(t *model.GRPCServerTLS) *tlsv3.DownstreamTlsContext {
	certs := cmp.Or(t.Certificates, DefaultCertificateProvider)
	require := t.RequireClientCertificate == nil || *t.RequireClientCertificate
	return &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: certs},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: cmp.Or(t.CA, certs)},
			}},
		},
		RequireClientCertificate: wrapperspb.Bool(require),
	}
}

// clientTLS is a proxyless gRPC client's UpstreamTlsContext from the
// certificate provider instance provider: the CA that verifies the
// service, and the client's own certificate.
func clientTLS(provider, sni string) *tlsv3.UpstreamTlsContext {
	return &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: provider},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: provider},
		}},
	}}
}

// rbacFilters are a server's RBAC filters (gRFC A41): one that refuses
// what a deny policy matches, then one that admits only what an allow
// policy matches; none for a side without policies.
func rbacFilters(r *model.GRPCRBAC) []*hcmv3.HttpFilter {
	if r == nil {
		return nil
	}
	var out []*hcmv3.HttpFilter
	add := func(name string, action rbacv3.RBAC_Action, ps []model.GRPCPolicy) {
		if len(ps) == 0 {
			return
		}
		rules := &rbacv3.RBAC{Action: action, Policies: map[string]*rbacv3.Policy{}}
		for i := range ps {
			rules.Policies[ps[i].Name] = rbacPolicy(&ps[i])
		}
		out = append(out, &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&rbacfilterv3.RBAC{Rules: rules})}})
	}
	add(RBACDenyFilter, rbacv3.RBAC_DENY, r.Deny)
	add(RBACAllowFilter, rbacv3.RBAC_ALLOW, r.Allow)
	return out
}

// rbacPolicy matches an RPC by caller, method and metadata: one
// permission (any of the methods and every header), one principal (any
// of the identities).
func rbacPolicy(p *model.GRPCPolicy) *rbacv3.Policy {
	var perms []*rbacv3.Permission
	if len(p.Methods) > 0 {
		var methods []*rbacv3.Permission
		for _, m := range p.Methods {
			methods = append(methods, &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
				Rule: &matcherv3.PathMatcher_Path{Path: globMatcher(m)}}}})
		}
		perms = append(perms, orPermissions(methods))
	}
	for _, h := range p.Headers {
		perms = append(perms, &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: grpcHeaderMatch(h)}})
	}
	perm := &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
	switch len(perms) {
	case 0:
	case 1:
		perm = perms[0]
	default:
		perm = &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: perms}}}
	}
	principals := []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}}
	if len(p.Principals) > 0 {
		principals = nil
		for _, id := range p.Principals {
			auth := &rbacv3.Principal_Authenticated{}
			if id != "*" {
				auth.PrincipalName = globMatcher(id)
			}
			principals = append(principals, &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: auth}})
		}
	}
	return &rbacv3.Policy{Permissions: []*rbacv3.Permission{perm}, Principals: principals}
}

func orPermissions(ps []*rbacv3.Permission) *rbacv3.Permission {
	if len(ps) == 1 {
		return ps[0]
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: ps}}}
}

// globMatcher matches s exactly or, ending in "*", by the prefix before it.
func globMatcher(s string) *matcherv3.StringMatcher {
	if prefix, ok := strings.CutSuffix(s, "*"); ok {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: prefix}}
	}
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}
