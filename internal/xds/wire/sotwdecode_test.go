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

func sotwSeeds() [][]byte {
	many := &discoveryv3.DiscoveryRequest{TypeUrl: "t", VersionInfo: "v", ResponseNonce: "7"}
	for i := range 200 {
		many.ResourceNames = append(many.ResourceNames, fmt.Sprintf("cluster-%d", i))
	}
	var out [][]byte
	for _, m := range []proto.Message{
		&discoveryv3.DiscoveryRequest{},
		&discoveryv3.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", VersionInfo: "abc", ResponseNonce: "12", ResourceNames: []string{"r"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: "t", ResourceNames: []string{"", "ü", "a"}},
		many,
		&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: "t"},
		&discoveryv3.DiscoveryRequest{TypeUrl: "t", ErrorDetail: &status.Status{Code: 3, Message: "bad"}},
		&discoveryv3.DiscoveryRequest{TypeUrl: "t", ResourceLocators: []*discoveryv3.ResourceLocator{{Name: "x"}}},
	} {
		b, _ := proto.Marshal(m)
		out = append(out, b)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	out = append(out,
		cat(str(4, "first"), str(3, "a"), str(4, "second"), str(1, "v1"), str(1, "v2")),                // singular fields twice: the last wins
		cat(str(4, "t"), str(5, "\xff")),                                                               // invalid UTF-8
		cat(str(4, "t"), str(99, "unknown")),                                                           // an unknown field
		cat(str(4, "t"), protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 3)), // another wire type
		cat(str(4, "t"), []byte{0x2a, 0x05, 'a'}),                                                      // truncated
		[]byte{0x22}, // a tag alone
		cat(str(3, "b"), str(3, "a"), str(3, "b")), // names in order, repeats kept
	)
	return out
}

// checkSotWDecode: unmarshalSotW gives exactly what proto.Unmarshal gives,
// error or message (names in the same order).
func checkSotWDecode(t *testing.T, b []byte) {
	t.Helper()
	checkDecode(t, b, &discoveryv3.DiscoveryRequest{}, &discoveryv3.DiscoveryRequest{}, unmarshalSotW)
}

// checkDecode: decode gives exactly what proto.Unmarshal gives, error or
// message; want and got are empty messages of the type.
func checkDecode[M proto.Message](t *testing.T, b []byte, want, got M, decode func([]byte, M) error) {
	t.Helper()
	wantErr, gotErr := proto.Unmarshal(b, want), decode(b, got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%x: error %v, proto.Unmarshal's %v", b, gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(want, got) {
		t.Fatalf("%x: decoded\n%v\nproto.Unmarshal decodes\n%v", b, got, want)
	}
}

func TestUnmarshalSotWIsProtoUnmarshal(t *testing.T) {
	for _, b := range sotwSeeds() {
		checkSotWDecode(t, b)
	}
}

// The field numbers unmarshalSotW reads are DiscoveryRequest's, and of the
// kind it reads them as (strings).
func TestSotWFieldNumbers(t *testing.T) {
	fields := (&discoveryv3.DiscoveryRequest{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[protoreflect.Name]protowire.Number{
		"version_info": versionInfoField, "resource_names": resourceNamesField,
		"type_url": typeURLField, "response_nonce": responseNonceField,
	} {
		f := fields.ByName(name)
		if f == nil || f.Number() != num || f.Kind() != protoreflect.StringKind {
			t.Errorf("DiscoveryRequest.%s: %v; want a string field numbered %d", name, f, num)
		}
	}
}

func FuzzSotWDecode(f *testing.F) {
	for _, b := range sotwSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSotWDecode(t, b) })
}

// BenchmarkDecodeSotWACK decodes a route ACK as a proxy sends it after
// its first request: version, one name, type and nonce.
func BenchmarkDecodeSotWACK(b *testing.B) {
	ack, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{
		VersionInfo: "4f0c2a9d81e3b7a6", ResourceNames: []string{"local_route"},
		TypeUrl: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", ResponseNonce: "1742",
	})
	for _, d := range []struct {
		name string
		fn   func([]byte, *discoveryv3.DiscoveryRequest) error
	}{
		{"unmarshalSotW", unmarshalSotW},
		{"proto.Unmarshal", func(b []byte, r *discoveryv3.DiscoveryRequest) error { return proto.Unmarshal(b, r) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := d.fn(ack, &discoveryv3.DiscoveryRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
