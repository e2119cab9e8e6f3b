package route

import (
	"fmt"
	"sort"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// findListener picks the listener a request reaches: a proxyless gRPC
// call's api_listener by target name (grpc-go's default listener resource
// name for xds:///target is the target), a named listener, or the one
// bound to the destination port. Two listeners on one port (different
// addresses) cannot be told apart without the destination address: the
// error asks for the listener by name.
func findListener(res *Resources, req *Request) (*listenerv3.Listener, *ListenerMatch, error) {
	if req.GRPC {
		l := res.Listeners[req.Authority]
		if l == nil || l.GetApiListener() == nil {
			return nil, nil, fmt.Errorf("no api_listener %q on this node: a gRPC client of xds:///%s fails with UNAVAILABLE (listener does not exist)", req.Authority, req.Authority)
		}
		return l, &ListenerMatch{Name: l.GetName(), How: "api_listener of target " + req.Authority}, nil
	}
	if req.Listener != "" {
		l := res.Listeners[req.Listener]
		if l == nil || l.GetApiListener() != nil {
			return nil, nil, fmt.Errorf("no listener %q on this node (listeners: %s)", req.Listener, listenerList(res))
		}
		addr, port := socketOf(l)
		return l, &ListenerMatch{Name: l.GetName(), Address: addr, Port: port, How: "its name"}, nil
	}
	port, how := req.destPort()
	var found []*listenerv3.Listener
	for _, name := range sortedKeys(res.Listeners) {
		l := res.Listeners[name]
		if _, p := socketOf(l); p == port && l.GetApiListener() == nil {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("no listener on port %d (%s) on this node; give the port or the listener (listeners: %s)", port, how, listenerList(res))
	case 1:
		addr, p := socketOf(found[0])
		return found[0], &ListenerMatch{Name: found[0].GetName(), Address: addr, Port: p, How: fmt.Sprintf("port %d (%s)", port, how)}, nil
	}
	names := make([]string, len(found))
	for i, l := range found {
		names[i] = l.GetName()
	}
	return nil, nil, fmt.Errorf("listeners %s all bind port %d; which one a connection reaches depends on its destination address: name the listener", strings.Join(names, ", "), port)
}

func socketOf(l *listenerv3.Listener) (string, uint32) {
	sa := l.GetAddress().GetSocketAddress()
	return sa.GetAddress(), sa.GetPortValue()
}

func listenerList(res *Resources) string {
	var out []string
	for _, name := range sortedKeys(res.Listeners) {
		l := res.Listeners[name]
		if l.GetApiListener() != nil {
			out = append(out, name+" (gRPC api_listener)")
			continue
		}
		addr, port := socketOf(l)
		out = append(out, fmt.Sprintf("%s (%s:%d)", name, addr, port))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// chain is a filter chain being considered, with its label.
type chain struct {
	fc    *listenerv3.FilterChain
	label string
}

// chainInput is what filter chain matching sees of a connection.
type chainInput struct {
	port      uint32
	sni       string // "" when unknown (no TLS, or no tls_inspector)
	transport string // "tls" or "raw_buffer"
}

// selectChain picks the filter chain as Envoy does: criteria in order
// (destination port, destination IP, server name, transport protocol,
// application protocols, then the source criteria); at each, the chains
// that match most specifically stay, else those that do not set it; none
// left: the default filter chain, else the connection is closed.
func selectChain(l *listenerv3.Listener, in chainInput, n *notes) (*chain, string, error) {
	if l.GetFilterChainMatcher() != nil {
		n.add("filter_chain_matcher (the unified matcher; chains picked by filter_chain_match instead)")
	}
	var cands []chain
	for i, fc := range l.GetFilterChains() {
		label := fc.GetName()
		if label == "" {
			label = fmt.Sprintf("#%d", i)
		}
		cands = append(cands, chain{fc, label})
	}
	var why []string
	for _, c := range criteria(in, n) {
		var w string
		cands, w = narrow(cands, c)
		if w != "" {
			why = append(why, w)
		}
	}
	if len(cands) > 0 {
		if len(why) == 0 {
			return &cands[0], "", nil
		}
		return &cands[0], "matched on " + strings.Join(why, ", "), nil
	}
	if d := l.GetDefaultFilterChain(); d != nil {
		label := d.GetName()
		if label == "" {
			label = "default_filter_chain"
		}
		return &chain{d, label}, "none of the filter chains matched", nil
	}
	return nil, "", fmt.Errorf("no filter chain of listener %q matches (port %d, server name %q, transport %s) and it has no default_filter_chain: the connection is closed", l.GetName(), in.port, in.sni, in.transport)
}

// criterion tells, for a chain, whether it sets the criterion, whether it
// matches, how specifically, and in words what matched.
type criterion func(m *listenerv3.FilterChainMatch) (set, ok bool, specificity int, what string)

// narrow keeps the chains that match the criterion most specifically, or,
// when none sets it and matches, those that leave it unset.
func narrow(cands []chain, c criterion) ([]chain, string) {
	best, bestSpec, what := []chain(nil), -1, ""
	var unset []chain
	for _, ch := range cands {
		set, ok, spec, w := c(ch.fc.GetFilterChainMatch())
		switch {
		case !set:
			unset = append(unset, ch)
		case ok && spec > bestSpec:
			best, bestSpec, what = []chain{ch}, spec, w
		case ok && spec == bestSpec:
			best = append(best, ch)
		}
	}
	if len(best) > 0 {
		return best, what
	}
	return unset, ""
}

func criteria(in chainInput, n *notes) []criterion {
	unsimulated := func(name string, isSet func(m *listenerv3.FilterChainMatch) bool) criterion {
		return func(m *listenerv3.FilterChainMatch) (bool, bool, int, string) {
			if !isSet(m) {
				return false, false, 0, ""
			}
			n.add("filter_chain_match.%s (treated as matching)", name)
			return true, true, 0, ""
		}
	}
	return []criterion{
		func(m *listenerv3.FilterChainMatch) (bool, bool, int, string) {
			if m.GetDestinationPort() == nil {
				return false, false, 0, ""
			}
			return true, m.GetDestinationPort().GetValue() == in.port, 0, fmt.Sprintf("destination port %d", in.port)
		},
		unsimulated("prefix_ranges (destination address)", func(m *listenerv3.FilterChainMatch) bool { return len(m.GetPrefixRanges()) > 0 }),
		func(m *listenerv3.FilterChainMatch) (bool, bool, int, string) {
			if len(m.GetServerNames()) == 0 {
				return false, false, 0, ""
			}
			spec, name := serverNameMatch(m.GetServerNames(), in.sni)
			return true, spec >= 0, spec, "server name " + name
		},
		func(m *listenerv3.FilterChainMatch) (bool, bool, int, string) {
			if m.GetTransportProtocol() == "" {
				return false, false, 0, ""
			}
			return true, m.GetTransportProtocol() == in.transport, 0, "transport " + in.transport
		},
		unsimulated("application_protocols (ALPN)", func(m *listenerv3.FilterChainMatch) bool { return len(m.GetApplicationProtocols()) > 0 }),
		unsimulated("source criteria", func(m *listenerv3.FilterChainMatch) bool {
			return len(m.GetDirectSourcePrefixRanges()) > 0 || len(m.GetSourcePrefixRanges()) > 0 || len(m.GetSourcePorts()) > 0 ||
				m.GetSourceType() != listenerv3.FilterChainMatch_ANY
		}),
	}
}

// serverNameMatch matches an SNI against server_names as Envoy does: an
// exact name first, then "*.suffix" wildcards, the longest first (a
// wildcard takes any number of labels). It returns the specificity (-1: no
// match) and the name that matched.
func serverNameMatch(names []string, sni string) (int, string) {
	if sni == "" {
		return -1, ""
	}
	sni = strings.ToLower(sni)
	best, bestName := -1, ""
	for _, n := range names {
		ln := strings.ToLower(n)
		switch {
		case ln == sni:
			return 1 << 20, n
		case strings.HasPrefix(ln, "*.") && strings.HasSuffix(sni, ln[1:]) && len(sni) > len(ln)-1:
			if len(ln) > best {
				best, bestName = len(ln), n
			}
		}
	}
	return best, bestName
}

// hasTLSInspector reports whether the listener reads the SNI.
func hasTLSInspector(l *listenerv3.Listener) bool {
	for _, f := range l.GetListenerFilters() {
		if strings.Contains(f.GetName(), "tls_inspector") || strings.HasSuffix(f.GetTypedConfig().GetTypeUrl(), "tls_inspector.v3.TlsInspector") {
			return true
		}
	}
	return false
}
