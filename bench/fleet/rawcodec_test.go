package main

import (
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/xdstype"
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

// TestInternKeepsOneCopy: intern returns the string of its bytes, one
// copy for equal bytes, and keeps at most maxInterned.
func TestInternKeepsOneCopy(t *testing.T) {
	f := &fleet{}
	a, b := f.intern([]byte("v1")), f.intern([]byte("v1"))
	if a != "v1" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("interned %q and %q apart", a, b)
	}
	for i := range maxInterned + 10 {
		if s := f.intern([]byte(strconv.Itoa(i))); s != strconv.Itoa(i) {
			t.Fatalf("interned %d as %q", i, s)
		}
	}
	if n := len(f.strings.Load()); n > maxInterned {
		t.Errorf("%d strings kept, bound %d", n, maxInterned)
	}
}

// TestAddrSeqBytesAsAddrSeq: the churn's addresses read off the wire
// give the sequence number addrSeq gives their string.
func TestAddrSeqBytesAsAddrSeq(t *testing.T) {
	for _, a := range []string{"10.128.0.0", "10.200.3.7", "10.255.255.255", "10.127.1.1", "11.200.1.1", "10.200.1", "10.200.1.1.1",
		"10..1.2", "10.200.01.1", "10.200.256.1", "10.200.1.", ".10.200.1", "", "10.200.1.1a", "::1", "10.1000.1.1", "10.200.0.0"} {
		if got, want := addrSeqBytes([]byte(a)), addrSeq(a); got != want {
			t.Errorf("%q: %d, want %d", a, got, want)
		}
	}
}

// TestReadAssignmentAsProto: the cluster name and the endpoints' addresses
// read off the wire are those of the decoded assignment.
func TestReadAssignmentAsProto(t *testing.T) {
	ep := func(addr string) *endpointv3.LbEndpoint {
		return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}},
			Hostname: "h"}}}
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "service-7", Endpoints: []*endpointv3.LocalityLbEndpoints{
		{Locality: &corev3.Locality{Zone: "a"}, LbEndpoints: []*endpointv3.LbEndpoint{ep("10.128.0.7"), ep("10.128.3.239")}},
		{LbEndpoints: []*endpointv3.LbEndpoint{ep("10.0.0.1")}, Priority: 1},
	}}
	b, _ := proto.Marshal(cla)
	var addrs []string
	name, err := readAssignment(b, func(a []byte) { addrs = append(addrs, string(a)) })
	if err != nil || name != "service-7" || !slices.Equal(addrs, []string{"10.128.0.7", "10.128.3.239", "10.0.0.1"}) {
		t.Errorf("read %q %v (%v)", name, addrs, err)
	}
	any1, _ := anypb.New(cla)
	var bodies int
	r := rawResponse{onEDS: func(v []byte) {
		if got, _ := readAssignment(v, func([]byte) {}); got == "service-7" {
			bodies++
		}
	}}
	sotw, _ := proto.Marshal(&discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{any1, any1}, TypeUrl: xdstype.EndpointURL})
	delta, _ := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{Resources: []*discoveryv3.Resource{{Name: "service-7", Resource: any1}}, TypeUrl: xdstype.EndpointURL})
	if r.decode(sotw, false) != nil || r.decode(delta, true) != nil || bodies != 3 {
		t.Errorf("%d assignments handed to onEDS, want 3", bodies)
	}
}

// TestProxyCodecReadsSplitResponses: a response in one buffer or split
// over several (a large one spans HTTP/2 frames) reads the same, through
// a reused buffer longer than it.
func TestProxyCodecReadsSplitResponses(t *testing.T) {
	c := newProxyCodec()
	long := make([]byte, 4096)
	c.bufs.Put(&long)
	b, _ := proto.Marshal(&discoveryv3.DiscoveryResponse{VersionInfo: "v7", TypeUrl: "t", Nonce: "n9"})
	for _, data := range []mem.BufferSlice{
		{mem.SliceBuffer(b)},
		{mem.SliceBuffer(b[:3]), mem.SliceBuffer(b[3:7]), mem.SliceBuffer(b[7:])},
	} {
		var r rawSotW
		if err := c.Unmarshal(data, &r); err != nil || r.version != "v7" || r.nonce != "n9" || r.typeURL != "t" || r.size != len(b) {
			t.Errorf("%d buffers: read %+v (%v)", len(data), r.rawResponse, err)
		}
	}
}

// TestEncodeDeltaWritesOnce: the buffer is sized to the request, so that
// a reconnect's 2,000 versions are not copied as the buffer grows.
func TestEncodeDeltaWritesOnce(t *testing.T) {
	versions := map[string]string{}
	for i := range 2000 {
		versions["cluster-"+strconv.Itoa(i)] = "v" + strconv.Itoa(i*7)
	}
	r := &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "envoy-1"}, TypeUrl: "t", InitialResourceVersions: versions}
	e, err := encodeDelta(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.b) != cap(e.b) || len(e.b) != proto.Size(r) {
		t.Errorf("encoded %d bytes in a buffer of %d, want both %d", len(e.b), cap(e.b), proto.Size(r))
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = encodeDelta(r) }); allocs > 3 {
		t.Errorf("encodeDelta allocates %v times, want at most 3 (the buffer, the request, the marshal's own)", allocs)
	}
}
