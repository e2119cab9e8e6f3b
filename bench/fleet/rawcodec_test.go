package main

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
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

// TestRawResponseReadsWhatProtoDoes: the fields a simulated proxy reads
// off the wire are those protobuf-go decodes, around fields it skips of
// every wire type.
func TestRawResponseReadsWhatProtoDoes(t *testing.T) {
	any1, _ := anypb.New(&corev3.Node{Id: "x"})
	sotw := &discoveryv3.DiscoveryResponse{VersionInfo: "v1", Resources: []*anypb.Any{any1, any1}, Canary: true, TypeUrl: "t", Nonce: "n", ControlPlane: &corev3.ControlPlane{Identifier: "p"}}
	b, _ := proto.Marshal(sotw)
	var r rawResponse
	if err := r.decode(b, false); err != nil {
		t.Fatal(err)
	}
	if r.size != len(b) || r.version != "v1" || r.typeURL != "t" || r.nonce != "n" || r.resources != 2 || len(r.names) != 0 {
		t.Errorf("SotW read as %+v", r)
	}
	delta := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "s", TypeUrl: "t", Nonce: "m", RemovedResources: []string{"gone"},
		Resources: []*discoveryv3.Resource{
			{Name: "a", Version: "1", Resource: any1, Ttl: durationpb.New(time.Second)},
			{Version: "2", Name: "b", Aliases: []string{"c"}},
		}}
	b, _ = proto.Marshal(delta)
	for _, intern := range []func([]byte) string{nil, (&fleet{}).intern} {
		r.intern = intern
		if err := r.decode(b, true); err != nil {
			t.Fatal(err)
		}
		if r.typeURL != "t" || r.nonce != "m" || r.resources != 2 || !slices.Equal(r.names, []string{"a", "b"}) ||
			!slices.Equal(r.versions, []string{"1", "2"}) || !slices.Equal(r.removed, []string{"gone"}) {
			t.Errorf("delta read as %+v (interned: %t)", r, intern != nil)
		}
	}
	if err := r.decode(b[:len(b)-1], true); err == nil {
		t.Error("a truncated response read without an error")
	}
}
