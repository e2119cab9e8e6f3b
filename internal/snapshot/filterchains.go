package snapshot

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
)

// maxChainCombinations bounds the match combinations a listener's check
// expands: a hostile listener whose chains each list many values of
// several criteria would otherwise take the product of them all. A chain
// past it is only compared whole with the chains before it.
const maxChainCombinations = 1 << 16

// chainCriteria are the filter_chain_match criteria in the order Envoy
// keys its chains by them (FilterChainManagerImpl), with how a problem
// names each.
var chainCriteria = [...]string{
	"destination port", "destination prefix", "server name", "transport protocol",
	"application protocol", "direct source prefix", "source type", "source prefix", "source port",
}

// filterChainProblems refuses a listener two of whose filter chains match
// the same connections by the same rules: Envoy keys every chain by each
// combination of its criteria's values (an unset criterion is a key of its
// own, the wildcard, distinct from every value) and rejects the listener,
// and the whole LDS update with it, when two chains share a key ("multiple
// filter chains with the same matching rules are defined"). The later
// chain's filter_chain_match is named.
func filterChainProblems(l *listenerv3.Listener) []fieldError {
	var out []fieldError
	owner := map[string]int{}
	budget := maxChainCombinations
	clash := func(i, prev int, what string) {
		out = append(out, fieldError{fmt.Sprintf("filter_chains[%d].filter_chain_match", i), fmt.Sprintf(
			"matches the same connections as %s (%s); Envoy rejects the listener: multiple filter chains with the same matching rules are defined",
			chainName(l, prev), what)})
	}
	for i, fc := range l.GetFilterChains() {
		values := chainValues(fc.GetFilterChainMatch())
		n := 1
		for _, v := range values {
			n = min(n*len(v), maxChainCombinations+1)
		}
		if n > budget {
			// Too many to expand: the same match, at least, is found.
			if prev := sameMatch(l, i); prev >= 0 {
				clash(i, prev, "the same filter_chain_match")
			}
			continue
		}
		budget -= n
		reported := false
		combinations(values, func(combo []string) {
			key := strings.Join(combo, "\x00")
			prev, taken := owner[key]
			if !taken {
				owner[key] = i
				return
			}
			if reported || prev == i {
				return
			}
			reported = true
			clash(i, prev, describeCombination(combo))
		})
	}
	return out
}

// sameMatch is the first chain before i whose filter_chain_match equals
// i's (unset is empty), or -1.
func sameMatch(l *listenerv3.Listener, i int) int {
	m := l.GetFilterChains()[i].GetFilterChainMatch()
	if m == nil {
		m = &listenerv3.FilterChainMatch{}
	}
	for j, fc := range l.GetFilterChains()[:i] {
		o := fc.GetFilterChainMatch()
		if o == nil {
			o = &listenerv3.FilterChainMatch{}
		}
		if proto.Equal(m, o) {
			return j
		}
	}
	return -1
}

// chainValues is each criterion's values as Envoy keys them; an unset
// criterion is the one value "" (the wildcard).
func chainValues(m *listenerv3.FilterChainMatch) [len(chainCriteria)][]string {
	var port string
	if m.GetDestinationPort() != nil {
		port = strconv.FormatUint(uint64(m.GetDestinationPort().GetValue()), 10)
	}
	var sourceType string
	if t := m.GetSourceType(); t != listenerv3.FilterChainMatch_ANY {
		sourceType = t.String()
	}
	sourcePorts := make([]string, len(m.GetSourcePorts()))
	for i, p := range m.GetSourcePorts() {
		sourcePorts[i] = strconv.FormatUint(uint64(p), 10)
	}
	return [...][]string{
		orWildcard([]string{port}),
		orWildcard(cidrs(m.GetPrefixRanges())),
		orWildcard(m.GetServerNames()),
		orWildcard([]string{m.GetTransportProtocol()}),
		orWildcard(m.GetApplicationProtocols()),
		orWildcard(cidrs(m.GetDirectSourcePrefixRanges())),
		orWildcard([]string{sourceType}),
		orWildcard(cidrs(m.GetSourcePrefixRanges())),
		orWildcard(sourcePorts),
	}
}

func orWildcard(v []string) []string {
	if len(v) == 0 {
		return []string{""}
	}
	return v
}

// cidrs are the ranges as Envoy keys them: the address masked to its
// length ("10.1.2.3/8" is "10.0.0.0/8").
func cidrs(rs []*corev3.CidrRange) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		s := fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue())
		if p, err := netip.ParsePrefix(s); err == nil {
			s = p.Masked().String()
		}
		out[i] = s
	}
	return out
}

// combinations calls fn with every combination of one value per
// criterion; combo is reused between calls.
func combinations(values [len(chainCriteria)][]string, fn func(combo []string)) {
	combo := make([]string, len(values))
	var rec func(d int)
	rec = func(d int) {
		if d == len(values) {
			fn(combo)
			return
		}
		for _, v := range values[d] {
			combo[d] = v
			rec(d + 1)
		}
	}
	rec(0)
}

func describeCombination(combo []string) string {
	var parts []string
	for d, v := range combo {
		if v != "" {
			parts = append(parts, fmt.Sprintf("%s %q", chainCriteria[d], v))
		}
	}
	if len(parts) == 0 {
		return "no criteria: every connection"
	}
	return strings.Join(parts, ", ")
}

func chainName(l *listenerv3.Listener, i int) string {
	if n := l.GetFilterChains()[i].GetName(); n != "" {
		return fmt.Sprintf("filter_chains[%d] (%q)", i, n)
	}
	return fmt.Sprintf("filter_chains[%d]", i)
}
