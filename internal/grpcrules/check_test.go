package grpcrules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

var ads = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}

func apiListener(filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	h := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r", ConfigSource: ads}},
		HttpFilters:    filters,
	}
	a, _ := anypb.New(h)
	return &listenerv3.Listener{Name: "l", ApiListener: &listenerv3.ApiListener{ApiListener: a}}
}

func filter(name, typeURL string, optional bool) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, IsOptional: optional, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: typeURL}}}
}

// refusers checks msg for every client and returns who refuses under rule.
func refusers(t *testing.T, msg any, rule string) []Client {
	t.Helper()
	var who []Client
	for _, p := range Check(msg.(proto.Message), All) {
		if p.Rule.ID == rule {
			who = append(who, p.Clients...)
		}
	}
	return who
}

// TestClientsDifferWhereTheirImplementationsDo: least_request and the
// gcp_authn filter are grpc-go's alone; the router read through a
// TypedStruct is still the router.
func TestClientsDifferWhereTheirImplementationsDo(t *testing.T) {
	lr := &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}, LbPolicy: clusterv3.Cluster_LEAST_REQUEST,
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads}}
	if got, want := refusers(t, lr, "cluster-lb-policy"), []Client{Core, JS}; !slices.Equal(got, want) {
		t.Errorf("LEAST_REQUEST refused by %v, want %v", got, want)
	}
	authn := apiListener(filter("authn", typeGCPAuthn, false), filter("router", typeRouter, false))
	if got, want := refusers(t, authn, "hcm-filter-unknown"), []Client{Core, JS}; !slices.Equal(got, want) {
		t.Errorf("gcp_authn refused by %v, want %v", got, want)
	}
	ts := protowire.AppendTag(nil, 1, protowire.BytesType)
	ts = protowire.AppendString(ts, typeRouter)
	wrapped := apiListener(&hcmv3.HttpFilter{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: typeStructV3, Value: ts}}})
	if p := Check(wrapped, All); len(p) != 0 {
		t.Errorf("a router in a TypedStruct: %+v", p)
	}
	if p := Check(lr, []Client{Go}); len(p) != 0 {
		t.Errorf("grpc-go alone refuses LEAST_REQUEST: %+v", p)
	}
}

// TestDocsListEveryRule: docs/grpc.md's table of refusals names every rule,
// and no rule that is gone.
func TestDocsListEveryRule(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "grpc.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, refusals, ok := strings.Cut(string(doc), "\n## Refusals\n")
	if !ok {
		t.Fatal("docs/grpc.md has no section Refusals")
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(refusals, "\n") {
		if id, ok := strings.CutPrefix(line, "| `"); ok {
			id, _, _ = strings.Cut(id, "`")
			listed[id] = true
		}
	}
	for _, r := range Rules {
		if !listed[r.ID] {
			t.Errorf("docs/grpc.md does not list rule %s", r.ID)
		}
		delete(listed, r.ID)
	}
	for id := range listed {
		t.Errorf("docs/grpc.md lists %q, which is no rule", id)
	}
}

// A server's filter chains overlap when grpc-go would file two under one
// match; raw_buffer and an unset transport protocol do not, nor do chains
// it drops.
func TestServerFilterChainsOverlap(t *testing.T) {
	hcm, _ := anypb.New(&hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "r", ConfigSource: ads}},
		HttpFilters:    []*hcmv3.HttpFilter{filter("router", typeRouter, false)},
	})
	chain := func(m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
		return &listenerv3.FilterChain{FilterChainMatch: m, Filters: []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}
	}
	server := func(chains ...*listenerv3.FilterChain) *listenerv3.Listener {
		return &listenerv3.Listener{Name: "s", Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0"}}}, FilterChains: chains}
	}
	for _, tc := range []struct {
		name    string
		l       *listenerv3.Listener
		refused bool
	}{
		{"one chain", server(chain(nil)), false},
		{"two without a match", server(chain(nil), chain(nil)), true},
		{"raw_buffer beside unset", server(chain(nil), chain(&listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"})), false},
		{"one kept, one dropped", server(chain(nil), chain(&listenerv3.FilterChainMatch{ServerNames: []string{"a"}})), false},
		{"only dropped", server(chain(&listenerv3.FilterChainMatch{ServerNames: []string{"a"}})), true},
		{"by source port", server(chain(&listenerv3.FilterChainMatch{SourcePorts: []uint32{1, 2}}), chain(&listenerv3.FilterChainMatch{SourcePorts: []uint32{2}})), true},
	} {
		if got := len(refusers(t, tc.l, "server-filter-chains")) > 0; got != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.name, got, tc.refused)
		}
	}
}
