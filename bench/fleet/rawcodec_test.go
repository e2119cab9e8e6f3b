package main

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// TestEncodeDeltaDecodesToTheRequest: the hand-encoded request is the
// request, versions included, and r is left as it was.
func TestEncodeDeltaDecodesToTheRequest(t *testing.T) {
	r := &discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "envoy-1"}, TypeUrl: "t", ResourceNamesSubscribe: []string{"a", "b"},
		InitialResourceVersions: map[string]string{"a": "1", "b": "2", "": "", "ü": "v"},
	}
	want := proto.Clone(r)
	e, err := encodeDelta(r)
	if err != nil {
		t.Fatal(err)
	}
	got := &discoveryv3.DeltaDiscoveryRequest{}
	if err := proto.Unmarshal(e.b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) || !proto.Equal(r, want) {
		t.Errorf("encoded %v, want %v (r now %v)", got, want, r)
	}
}
