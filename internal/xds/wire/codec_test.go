package wire

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A shared response's tail, encoded by hand, is byte for byte what
// proto.Marshal writes for the nonce and control plane, in both message
// kinds: an empty nonce and identifier, a long nonce (a two-byte length),
// and a control plane other than the server's (proto.Marshal itself).
func TestTailsAsProtoEncodes(t *testing.T) {
	long := string(make([]byte, 300))
	for _, id := range []string{"", "pylon-1"} {
		cp := &corev3.ControlPlane{Identifier: id}
		tl, err := newTails(cp)
		if err != nil {
			t.Fatal(err)
		}
		other := &corev3.ControlPlane{Identifier: "other"}
		for _, nonce := range []string{"", "1", "a2f9", long} {
			for _, c := range []*corev3.ControlPlane{cp, other, nil} {
				got, err := tl.sotw(nonce, c)
				want, werr := proto.Marshal(&discoverygrpc.DiscoveryResponse{Nonce: nonce, ControlPlane: c})
				if err != nil || werr != nil || string(got) != string(want) {
					t.Errorf("SotW tail, nonce %q (%d bytes), control plane %v: %x, %v; want %x, %v", nonce[:min(len(nonce), 8)], len(nonce), c, got, err, want, werr)
				}
				got, err = tl.delta(nonce, c)
				want, werr = proto.Marshal(&discoverygrpc.DeltaDiscoveryResponse{Nonce: nonce, ControlPlane: c})
				if err != nil || werr != nil || string(got) != string(want) {
					t.Errorf("delta tail, nonce %q (%d bytes), control plane %v: %x, %v; want %x, %v", nonce[:min(len(nonce), 8)], len(nonce), c, got, err, want, werr)
				}
			}
		}
	}
	// An identifier proto cannot encode gives tails that leave every tail
	// to proto.Marshal, and its error.
	bad := &corev3.ControlPlane{Identifier: "\xff"}
	tl, err := newTails(bad)
	if err == nil {
		t.Fatal("newTails of a control plane that is not UTF-8: no error")
	}
	if _, err := tl.sotw("1", bad); err == nil {
		t.Error("a tail naming a control plane that is not UTF-8: no error")
	}
}

// TestSharedEncodingKeepsResourceErrors: a response carrying every
// resource of its set would share the set's encoded body; one that also
// carries resource_errors (xRFC TP3) must still send them, so it is sent
// whole, SotW and delta alike.
func TestSharedEncodingKeepsResourceErrors(t *testing.T) {
	reg := xdstype.New()
	snap, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.EndpointURL), Name: "a", Message: &endpointv3.ClusterLoadAssignment{ClusterName: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	set := snap.Set(xdstype.EndpointURL)
	var enc Encoder
	enc.Init(&corev3.ControlPlane{Identifier: "pylon"})
	errs := []*discoverygrpc.ResourceError{{ResourceName: &discoverygrpc.ResourceName{Name: "ghost"}, ErrorDetail: &rpcstatus.Status{Code: 5, Message: "not found"}}}
	sotw := &discoverygrpc.DiscoveryResponse{VersionInfo: set.Version(), Resources: []*anypb.Any{set.Get("a").ForSotW(false)}, TypeUrl: xdstype.EndpointURL, Nonce: "1", ResourceErrors: errs}
	delta := &discoverygrpc.DeltaDiscoveryResponse{SystemVersionInfo: "v", Resources: []*discoverygrpc.Resource{set.Get("a").ForDelta(false)}, TypeUrl: xdstype.EndpointURL, Nonce: "1", ResourceErrors: errs}
	for _, c := range []struct {
		name string
		msg  any
		want proto.Message
	}{
		{"sotw", enc.SotW(set, false, sotw), sotw},
		{"delta", enc.Delta(set, false, delta), delta},
	} {
		var got []byte
		if e, ok := c.msg.(*Encoded); ok {
			body, tail := e.Parts()
			got = append(append([]byte{}, body...), tail...)
		} else {
			got, err = proto.Marshal(c.msg.(proto.Message))
			if err != nil {
				t.Fatal(err)
			}
		}
		decoded := c.want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(got, decoded); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, decoded, protocmp.Transform()); diff != "" {
			t.Errorf("%s: what is sent differs from the response (-want +sent):\n%s", c.name, diff)
		}
	}
}
