package xds

import (
	"strings"
	"unicode/utf8"

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
// reads itself, every string in one allocation: proto.Unmarshal was 6% of a
// route change's CPU at 5,000 streams, mostly allocations. Anything else (a
// node, an error detail, resource locators, unknown fields, another wire
// type, invalid UTF-8, a malformed field) goes to proto.Unmarshal on the
// whole message, so the result, and any error, is proto.Unmarshal's.
//
// It reads b twice, checking then decoding, rather than noting where the
// fields are: the stream's goroutine reads with a stack kept small (see
// serveStream), and the request may name thousands of resources.
func unmarshalSotW(b []byte, r *discoveryv3.DiscoveryRequest) error {
	size, names, ok := checkSotW(b)
	if !ok {
		return proto.Unmarshal(b, r)
	}
	var all strings.Builder
	all.Grow(size)
	for i := 0; i < len(b); {
		_, _, tn := protowire.ConsumeTag(b[i:])
		v, vn := protowire.ConsumeBytes(b[i+tn:])
		all.Write(v)
		i += tn + vn
	}
	// Every value is a piece of one string.
	text := all.String()
	if names > 0 {
		r.ResourceNames = make([]string, 0, names)
	}
	off := 0
	for i := 0; i < len(b); {
		num, _, tn := protowire.ConsumeTag(b[i:])
		v, vn := protowire.ConsumeBytes(b[i+tn:])
		s := text[off : off+len(v)]
		off += len(v)
		i += tn + vn
		switch num { // a singular field given twice: the last wins, as in proto
		case versionInfoField:
			r.VersionInfo = s
		case typeURLField:
			r.TypeUrl = s
		case responseNonceField:
			r.ResponseNonce = s
		case resourceNamesField:
			r.ResourceNames = append(r.ResourceNames, s)
		}
	}
	return nil
}

// checkSotW reports whether b holds only the string fields unmarshalSotW
// reads, well formed and valid UTF-8: the bytes of their values together
// and how many resource names.
func checkSotW(b []byte) (size, names int, ok bool) {
	for i := 0; i < len(b); {
		num, typ, tn := protowire.ConsumeTag(b[i:])
		if tn < 0 || typ != protowire.BytesType {
			return 0, 0, false
		}
		switch num {
		case versionInfoField, typeURLField, responseNonceField:
		case resourceNamesField:
			names++
		default:
			return 0, 0, false
		}
		v, vn := protowire.ConsumeBytes(b[i+tn:])
		if vn < 0 || !utf8.Valid(v) {
			return 0, 0, false
		}
		size += len(v)
		i += tn + vn
	}
	return size, names, true
}
