package wire

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func deltaSeeds() [][]byte {
	full := &discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "n"}, TypeUrl: "t", ResourceNamesSubscribe: []string{"a", "b"},
		ResponseNonce: "1", ErrorDetail: &status.Status{Code: 3, Message: "bad"},
		InitialResourceVersions: map[string]string{"a": "1", "b": "", "": "x", "ü": "v"},
	}
	big := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: "t", InitialResourceVersions: map[string]string{}}
	for i := range 100 {
		big.InitialResourceVersions[fmt.Sprintf("cluster-%d", i)] = fmt.Sprint(i)
	}
	var out [][]byte
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", ResponseNonce: "17"}
	subs := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: "t", ResourceNamesSubscribe: []string{"a", "", "ü"}, ResourceNamesUnsubscribe: []string{"b", "a"}, ResponseNonce: "3",
		InitialResourceVersions: map[string]string{"a": "1"}}
	for _, m := range []proto.Message{full, big, ack, subs, &discoveryv3.DeltaDiscoveryRequest{}, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: "only"}} {
		b, _ := proto.Marshal(m)
		out = append(out, b)
	}
	entry := func(fields ...[]byte) []byte {
		var e []byte
		for _, f := range fields {
			e = append(e, f...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), e)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	out = append(out,
		entry(str(1, "k"), str(2, "v"), str(1, "k2")),                               // a key twice in an entry
		entry(str(2, "v")),                                                          // no key
		entry(str(1, "k"), str(3, "extra")),                                         // an unknown field in the entry
		entry(str(1, "\xff"), str(2, "v")),                                          // invalid UTF-8
		append(entry(str(1, "k"), str(2, "1")), entry(str(1, "k"), str(2, "2"))...), // a key twice: the last wins
		append(str(2, "type"), entry(str(1, "k"), str(2, "v"))...),
		protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 7),                   // the map field with another wire type
		[]byte{0x2a, 0x05, 0x0a},                                                                       // a truncated entry
		append(append(str(2, "first"), str(6, "n1")...), append(str(2, "second"), str(6, "n2")...)...), // singular fields twice: the last wins
		append(str(2, "t"), str(3, "\xff")...),                                                         // a name not UTF-8
		append(str(2, "t"), append(str(3, "a"), str(99, "unknown")...)...),                             // an unknown field
	)
	return out
}

// checkDeltaDecode: unmarshalDelta gives exactly what proto.Unmarshal
// gives, error or message.
func checkDeltaDecode(t *testing.T, b []byte) {
	t.Helper()
	checkDecode(t, b, &discoveryv3.DeltaDiscoveryRequest{}, &discoveryv3.DeltaDiscoveryRequest{}, unmarshalDelta)
}

// The field numbers unmarshalDelta reads are DeltaDiscoveryRequest's, and
// of the kind it reads them as.
func TestDeltaFieldNumbers(t *testing.T) {
	fields := (&discoveryv3.DeltaDiscoveryRequest{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[protoreflect.Name]protowire.Number{
		"type_url": deltaTypeURLField, "resource_names_subscribe": subscribeField,
		"resource_names_unsubscribe": unsubscribeField, "response_nonce": deltaNonceField,
		"initial_resource_versions": initialVersionsField,
	} {
		f := fields.ByName(name)
		if f == nil || f.Number() != num {
			t.Errorf("DeltaDiscoveryRequest.%s: %v; want field %d", name, f, num)
		}
	}
}

func TestUnmarshalDeltaIsProtoUnmarshal(t *testing.T) {
	for _, b := range deltaSeeds() {
		checkDeltaDecode(t, b)
	}
}

func FuzzDeltaDecode(f *testing.F) {
	for _, b := range deltaSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDeltaDecode(t, b) })
}

// BenchmarkDecodeDeltaReconnect decodes the first request of a delta
// client reconnecting with 1,000 clusters held: 1,000 names and versions.
func BenchmarkDecodeDeltaReconnect(b *testing.B) {
	r := &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "envoy-1", Cluster: "bench"}, TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", InitialResourceVersions: map[string]string{}}
	for i := range 1000 {
		name := fmt.Sprintf("service-%04d", i)
		r.ResourceNamesSubscribe = append(r.ResourceNamesSubscribe, name)
		r.InitialResourceVersions[name] = fmt.Sprintf("%016x", i*7919)
	}
	data, _ := proto.Marshal(r)
	for _, c := range []struct {
		name string
		fn   func([]byte, *discoveryv3.DeltaDiscoveryRequest) error
	}{
		{"proto.Unmarshal", func(b []byte, m *discoveryv3.DeltaDiscoveryRequest) error { return proto.Unmarshal(b, m) }},
		{"unmarshalDelta", unmarshalDelta},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.fn(data, &discoveryv3.DeltaDiscoveryRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
