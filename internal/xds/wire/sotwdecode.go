package wire

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// DiscoveryRequest's string fields, the only ones unmarshalSotW reads
// itself (TestSotWFieldNumbers checks them against the descriptor).
const (
	versionInfoField   protowire.Number = 1
	resourceNamesField protowire.Number = 3
	typeURLField       protowire.Number = 4
	responseNonceField protowire.Number = 5
)

// unmarshalSotW decodes a DiscoveryRequest into r (zero). What a proxy sends
// most, an ACK or a request of a few names without its node (Envoy with
// set_node_on_first_message_only, gRPC's clients after their first), it
// reads itself, every string in one allocation: proto.Unmarshal's
// allocations stand out in the CPU profile of the fleet benchmark's route
// change (bench/fleet -n 5000 -profile), and BenchmarkDecodeSotWACK
// compares the two. Anything else (a node, an error detail, resource
// locators, unknown fields, another wire type, invalid UTF-8, a malformed
// field) goes to proto.Unmarshal on the whole message, so the result, and
// any error, is proto.Unmarshal's.
func unmarshalSotW(b []byte, r *discoveryv3.DiscoveryRequest) error {
	fields := [...]stringField{
		{num: versionInfoField, one: &r.VersionInfo},
		{num: resourceNamesField, many: &r.ResourceNames},
		{num: typeURLField, one: &r.TypeUrl},
		{num: responseNonceField, one: &r.ResponseNonce},
	}
	if !decodeStrings(b, [][2]int{{0, len(b)}}, fields[:]) {
		return proto.Unmarshal(b, r)
	}
	return nil
}
