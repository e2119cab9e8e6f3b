package snapshot_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// chainsListener is a listener on port 443 with a filter chain per match
// (nil: a chain without filter_chain_match), named c0, c1, ...
func chainsListener(matches ...*listenerv3.FilterChainMatch) *listenerv3.Listener {
	l := &listenerv3.Listener{
		Name: "edge",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 443}}}},
	}
	for i, m := range matches {
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: "c" + string(rune('0'+i)), FilterChainMatch: m})
	}
	return l
}

func cidr(addr string, n uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: addr, PrefixLen: wrapperspb.UInt32(n)}
}

// Two filter chains of one listener that match the same connections by
// the same rules are refused, as Envoy refuses the listener ("multiple
// filter chains with the same matching rules are defined"), naming the
// file, line, listener and the later chain's filter_chain_match; chains
// that differ in any rule Envoy keys on, a wildcard beside a specific
// value included, are not.
func TestFilterChainsWithTheSameMatchAreRefused(t *testing.T) {
	sni := func(tp string, names ...string) *listenerv3.FilterChainMatch {
		return &listenerv3.FilterChainMatch{ServerNames: names, TransportProtocol: tp}
	}
	refusedCases := []struct {
		name  string
		l     *listenerv3.Listener
		field string // the later chain's
		other string // the earlier chain, as the message names it
	}{
		{"the same match twice", chainsListener(sni("tls", "a.example.com"), sni("tls", "a.example.com")), "filter_chains[1].filter_chain_match", `filter_chains[0] ("c0")`},
		{"no match and an empty match", chainsListener(nil, &listenerv3.FilterChainMatch{}), "filter_chains[1].filter_chain_match", `filter_chains[0] ("c0")`},
		{"server names sharing one", chainsListener(sni("tls", "a.example.com", "b.example.com"), sni("", "x"), sni("tls", "c.example.com", "b.example.com")), "filter_chains[2].filter_chain_match", `filter_chains[0] ("c0")`},
		{"a prefix written two ways", chainsListener(
			&listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080), PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}},
			&listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080), PrefixRanges: []*corev3.CidrRange{cidr("10.1.2.3", 8)}}),
			"filter_chains[1].filter_chain_match", `filter_chains[0] ("c0")`},
		{"source ports sharing one", chainsListener(
			&listenerv3.FilterChainMatch{SourcePorts: []uint32{1, 2}},
			&listenerv3.FilterChainMatch{SourcePorts: []uint32{3, 2}}),
			"filter_chains[1].filter_chain_match", `filter_chains[0] ("c0")`},
	}
	for _, c := range refusedCases {
		t.Run(c.name, func(t *testing.T) {
			got := refused(t, c.l)
			if len(got) != 1 {
				t.Fatalf("%d diagnostics, want 1:\n%v", len(got), got)
			}
			d := got[0]
			if d.File != "a.yaml" || d.Line != 1 || d.Type != "Listener" || d.Name != "edge" || d.Field != c.field {
				t.Errorf("diagnostic at %s:%d %s %q %s, want a.yaml:1 Listener \"edge\" %s", d.File, d.Line, d.Type, d.Name, d.Field, c.field)
			}
			if !strings.Contains(d.Message, c.other) || !strings.Contains(d.Message, "multiple filter chains with the same matching rules are defined") {
				t.Errorf("message %q does not name %s and Envoy's refusal", d.Message, c.other)
			}
		})
	}
	accepted := []struct {
		name string
		l    *listenerv3.Listener
	}{
		{"different server names", chainsListener(sni("tls", "a.example.com"), sni("tls", "b.example.com"))},
		{"a wildcard beside a name", chainsListener(sni("tls"), sni("tls", "a.example.com"), nil)},
		{"different ports", chainsListener(
			&listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080)},
			&listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8081)})},
		{"different prefixes", chainsListener(
			&listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 8)}},
			&listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{cidr("10.0.0.0", 16)}})},
		{"different source types", chainsListener(
			&listenerv3.FilterChainMatch{SourceType: listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK},
			&listenerv3.FilterChainMatch{SourceType: listenerv3.FilterChainMatch_EXTERNAL})},
		{"different ALPN", chainsListener(
			&listenerv3.FilterChainMatch{ApplicationProtocols: []string{"h2"}},
			&listenerv3.FilterChainMatch{ApplicationProtocols: []string{"http/1.1"}})},
	}
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			reg := xdstype.New()
			if _, err := snapshot.Build(reg, typedInputs(t, reg, c.l)); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// A listener whose chains would expand to more match combinations than
// the check's bound is checked in bounded time: such a chain is compared
// whole with the chains before it, so the same match twice is still
// refused.
func TestFilterChainCheckIsBounded(t *testing.T) {
	m := &listenerv3.FilterChainMatch{}
	for i := range 400 {
		m.ServerNames = append(m.ServerNames, "h"+strconv.Itoa(i)+".example.com")
		m.SourcePorts = append(m.SourcePorts, uint32(i+1))
		m.ApplicationProtocols = append(m.ApplicationProtocols, "p"+strconv.Itoa(i))
	}
	other := proto.Clone(m).(*listenerv3.FilterChainMatch)
	other.SourcePorts[0] = 9999
	reg := xdstype.New()
	start := time.Now()
	// These two share names (Envoy refuses them); past the bound only a
	// whole match is compared, so whether they are refused is not what
	// this asserts, only that the check ends.
	_, _ = snapshot.Build(reg, typedInputs(t, reg, chainsListener(m, other)))
	got := refused(t, chainsListener(m, m))
	if len(got) != 1 || got[0].Field != "filter_chains[1].filter_chain_match" || !strings.Contains(got[0].Message, "the same filter_chain_match") {
		t.Fatalf("the same match twice, past the bound: %v", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the checks took %v", d)
	}
}
