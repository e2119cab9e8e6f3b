package grpcrules

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// serverListener checks an xDS-enabled server's Listener (gRFC A36) as
// grpc-go's processServerSideListener and its filter chain manager read
// it: a socket address; filter chains of which some are kept (grpc-go
// drops those matching what a server cannot know: destination port,
// server names, application protocols, a transport protocol other than
// raw_buffer), none two with one match; each of HttpConnectionManagers
// and a TLS context from certificate providers.
func (c *checker) serverListener(l *listenerv3.Listener) {
	if len(l.GetListenerFilters()) > 0 {
		c.add("server-listener", nil, "listener_filters", "not supported by gRPC servers; leave it empty")
	}
	if l.GetUseOriginalDst().GetValue() {
		c.add("server-listener", nil, "use_original_dst", "not supported by gRPC servers; leave it unset")
	}
	if l.GetAddress().GetSocketAddress() == nil {
		c.add("server-listener", nil, "address", "a gRPC server's Listener has a socket_address, the address it serves on")
	}
	kept := 0
	matches := map[string]string{}
	for i, fc := range l.GetFilterChains() {
		field := fmt.Sprintf("filter_chains[%d]", i)
		c.serverChain(field, fc)
		if dropped(fc.GetFilterChainMatch()) {
			continue
		}
		kept++
		for _, key := range c.matchKeys(fc.GetFilterChainMatch()) {
			if prev, dup := matches[key]; dup {
				c.add("server-filter-chains", nil, field+".filter_chain_match", "matches what %s matches: gRPC servers NACK overlapping filter chains", prev)
				break
			}
			matches[key] = field
		}
	}
	if d := l.GetDefaultFilterChain(); d != nil {
		c.serverChain("default_filter_chain", d)
	} else if kept == 0 {
		c.add("server-filter-chains", nil, "filter_chains", "no filter chain a gRPC server keeps (it drops those matching destination_port, server_names, application_protocols, or a transport_protocol other than raw_buffer) and no default_filter_chain")
	}
}

// dropped reports whether grpc-go drops a chain for its match.
func dropped(m *listenerv3.FilterChainMatch) bool {
	tp := m.GetTransportProtocol()
	return m.GetDestinationPort().GetValue() != 0 || len(m.GetServerNames()) > 0 || len(m.GetApplicationProtocols()) > 0 || (tp != "" && tp != "raw_buffer")
}

// matchKeys are the (destination prefix, transport protocol, source type,
// source prefix, source port) combinations a chain matches, the way
// grpc-go files chains.
func (c *checker) matchKeys(m *listenerv3.FilterChainMatch) []string {
	dst := c.prefixes(m.GetPrefixRanges())
	src := c.prefixes(m.GetSourcePrefixRanges())
	ports := []uint32{0}
	if len(m.GetSourcePorts()) > 0 {
		ports = m.GetSourcePorts()
	}
	var keys []string
	for _, d := range dst {
		for _, s := range src {
			for _, p := range ports {
				keys = append(keys, fmt.Sprintf("%s|%s|%d|%s|%d", d, m.GetTransportProtocol(), m.GetSourceType(), s, p))
			}
		}
	}
	return keys
}

// prefixes are the ranges as written: two ranges written differently for
// one network are not caught as overlapping (grpc-go would NACK them),
// and no range is refused that grpc-go takes.
func (c *checker) prefixes(ranges []*corev3.CidrRange) []string {
	if len(ranges) == 0 {
		return []string{""}
	}
	out := make([]string, len(ranges))
	for i, r := range ranges {
		out[i] = fmt.Sprintf("%s/%d", strings.ToLower(r.GetAddressPrefix()), r.GetPrefixLen().GetValue())
	}
	return out
}

// serverChain checks one filter chain's network filters and TLS.
func (c *checker) serverChain(field string, fc *listenerv3.FilterChain) {
	seen := map[string]bool{}
	hcms := 0
	for j, f := range fc.GetFilters() {
		ff := fmt.Sprintf("%s.filters[%d]", field, j)
		hcm := &hcmv3.HttpConnectionManager{}
		switch {
		case f.GetName() == "" || seen[f.GetName()]:
			c.add("server-network-filters", nil, ff+".name", "%q: gRPC servers want every network filter named, once", f.GetName())
		case !f.GetTypedConfig().MessageIs(hcm) || f.GetTypedConfig().UnmarshalTo(hcm) != nil:
			c.add("server-network-filters", nil, ff+".typed_config", "%q: the HttpConnectionManager is the only network filter gRPC servers implement", f.GetTypedConfig().GetTypeUrl())
		default:
			hcms++
			c.hcm(ff+".typed_config", hcm, true)
		}
		seen[f.GetName()] = true
	}
	if hcms == 0 {
		c.add("server-network-filters", nil, field+".filters", "no HttpConnectionManager: gRPC servers need one")
	}
	if ts := fc.GetTransportSocket(); ts != nil {
		c.serverTLS(field+".transport_socket", ts)
	}
}

// serverTLS checks a server's TLS as grpc-go reads it (gRFC A29).
func (c *checker) serverTLS(field string, ts *corev3.TransportSocket) {
	down := &tlsv3.DownstreamTlsContext{}
	bad := func(f, format string, args ...any) { c.add("server-tls", nil, join(field, f), format, args...) }
	if ts.GetName() != "envoy.transport_sockets.tls" {
		bad("name", "%q: gRPC servers take envoy.transport_sockets.tls only", ts.GetName())
		return
	}
	if !ts.GetTypedConfig().MessageIs(down) || ts.GetTypedConfig().UnmarshalTo(down) != nil {
		bad("typed_config", "%q is not a DownstreamTlsContext", ts.GetTypedConfig().GetTypeUrl())
		return
	}
	const ctx = "typed_config"
	if down.GetRequireSni().GetValue() {
		bad(ctx+".require_sni", "not supported by gRPC servers")
	}
	if down.GetOcspStaplePolicy() != tlsv3.DownstreamTlsContext_LENIENT_STAPLING {
		bad(ctx+".ocsp_staple_policy", "%s: gRPC servers take LENIENT_STAPLING only", down.GetOcspStaplePolicy())
	}
	common := down.GetCommonTlsContext()
	if common == nil {
		bad(ctx+".common_tls_context", "missing")
		return
	}
	// The deprecated fields count too: grpc-go falls back to them.
	identity := common.GetTlsCertificateProviderInstance().GetInstanceName() != ""
	//lint:ignore SA1019 grpc-go still reads the deprecated provider fields
	identity = identity || common.GetTlsCertificateCertificateProviderInstance().GetInstanceName() != ""
	if !identity {
		bad(ctx+".common_tls_context", "no tls_certificate_provider_instance: gRPC servers take their certificate from a certificate provider instance of their bootstrap (gRFC A29), not from SDS or inline")
	}
	root := common.GetValidationContext().GetCaCertificateProviderInstance().GetInstanceName() != ""
	//lint:ignore SA1019 grpc-go still reads the deprecated provider fields
	root = root || common.GetValidationContextCertificateProviderInstance().GetInstanceName() != ""
	//lint:ignore SA1019 grpc-go still reads the deprecated provider fields
	root = root || common.GetCombinedValidationContext().GetValidationContextCertificateProviderInstance().GetInstanceName() != ""
	if down.GetRequireClientCertificate().GetValue() && !root {
		bad(ctx+".require_client_certificate", "no CA certificate provider instance to verify the client certificates it requires")
	}
	//lint:ignore SA1019 grpc-go NACKs the deprecated field on servers
	if len(common.GetValidationContext().GetMatchSubjectAltNames()) > 0 || len(common.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames()) > 0 {
		bad(ctx+".common_tls_context", "match_subject_alt_names: gRPC servers do not match clients' names in TLS; say who may call in RBAC")
	}
}

// serverRBAC checks an RBAC filter's config as grpc-go's RBAC filter
// parses it (gRFC A41): no conditions, no header matchers on :scheme or
// grpc- names.
func (c *checker) serverRBAC(field string, cfg *rbacfilterv3.RBAC) {
	for name, p := range cfg.GetRules().GetPolicies() {
		pf := fmt.Sprintf("%s.rules.policies[%q]", field, name)
		if p.GetCondition() != nil || p.GetCheckedCondition() != nil {
			c.add("server-rbac", nil, pf, "a condition: gRPC servers NACK policies with condition or checked_condition")
		}
		var headers []*routev3.HeaderMatcher
		for _, perm := range p.GetPermissions() {
			headers = permissionHeaders(perm, headers)
		}
		for _, id := range p.GetPrincipals() {
			headers = principalHeaders(id, headers)
		}
		for _, h := range headers {
			n := strings.ToLower(h.GetName())
			if n == ":scheme" || strings.HasPrefix(n, "grpc-") {
				c.add("server-rbac", nil, pf, "a header matcher on %q: gRPC servers NACK RBAC on :scheme and grpc- headers", h.GetName())
			}
		}
	}
}

func permissionHeaders(p *rbacv3.Permission, out []*routev3.HeaderMatcher) []*routev3.HeaderMatcher {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Header:
		out = append(out, r.Header)
	case *rbacv3.Permission_AndRules:
		for _, q := range r.AndRules.GetRules() {
			out = permissionHeaders(q, out)
		}
	case *rbacv3.Permission_OrRules:
		for _, q := range r.OrRules.GetRules() {
			out = permissionHeaders(q, out)
		}
	case *rbacv3.Permission_NotRule:
		out = permissionHeaders(r.NotRule, out)
	}
	return out
}

func principalHeaders(p *rbacv3.Principal, out []*routev3.HeaderMatcher) []*routev3.HeaderMatcher {
	switch r := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Header:
		out = append(out, r.Header)
	case *rbacv3.Principal_AndIds:
		for _, q := range r.AndIds.GetIds() {
			out = principalHeaders(q, out)
		}
	case *rbacv3.Principal_OrIds:
		for _, q := range r.OrIds.GetIds() {
			out = principalHeaders(q, out)
		}
	case *rbacv3.Principal_NotId:
		out = principalHeaders(r.NotId, out)
	}
	return out
}
