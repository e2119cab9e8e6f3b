package wire

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
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
