package wire

import (
	"strings"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// DeltaDiscoveryRequest's fields unmarshalDelta reads itself
// (TestDeltaFieldNumbers checks them against the descriptor).
const (
	deltaTypeURLField    protowire.Number = 2
	subscribeField       protowire.Number = 3
	unsubscribeField     protowire.Number = 4
	initialVersionsField protowire.Number = 5
	deltaNonceField      protowire.Number = 6
)

// unmarshalDelta decodes a DeltaDiscoveryRequest into r (zero), reading
// initial_resource_versions itself: a reconnecting client presents a
// version for every resource it holds (2,000 entries for 1,000 clusters),
// and protobuf-go's reflective map decoding was more than half of the
// server's CPU in a fleet reconnect. The other fields of an ACK (type,
// nonce, names to subscribe and unsubscribe) are read by hand too
// (decodeStrings); any others go through proto.Unmarshal. Anything the
// fast path does not expect in the map (another wire type, another field,
// invalid UTF-8, a malformed entry) is left to proto.Unmarshal on the
// whole message, so the result, and any error, is proto.Unmarshal's.
func unmarshalDelta(b []byte, r *discoveryv3.DeltaDiscoveryRequest) error {
	pairs, size, rest, ok := splitVersions(b)
	if !ok {
		return proto.Unmarshal(b, r)
	}
	// The other fields: an ACK's few strings read by hand (as a SotW
	// request's, decodeStrings), else proto, in their order, without
	// copying them together: proto3 decoding merges field by field, so
	// pieces decode as the whole.
	fields := [...]stringField{
		{num: deltaTypeURLField, one: &r.TypeUrl},
		{num: subscribeField, many: &r.ResourceNamesSubscribe},
		{num: unsubscribeField, many: &r.ResourceNamesUnsubscribe},
		{num: deltaNonceField, one: &r.ResponseNonce},
	}
	if !decodeStrings(b, rest, fields[:]) {
		merge := proto.UnmarshalOptions{Merge: true}
		for _, seg := range rest {
			if err := merge.Unmarshal(b[seg[0]:seg[1]], r); err != nil {
				return err
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// Every key and value in one string: two allocations a map instead of
	// two an entry. The strings share its memory, which lives as long as
	// any of them does: about what they would take on their own.
	var all strings.Builder
	all.Grow(size)
	for _, p := range pairs {
		all.Write(p[0])
		all.Write(p[1])
	}
	text := all.String()
	m := make(map[string]string, len(pairs))
	at := 0
	for _, p := range pairs {
		k, v := at+len(p[0]), at+len(p[0])+len(p[1])
		m[text[at:k]] = text[k:v] // the last of a key twice wins, as in proto
		at = v
	}
	r.InitialResourceVersions = m
	return nil
}

// splitVersions reads the fields of b: the version entries' keys and
// values (pointing into b; size, their bytes together) and where the other
// fields are (runs of b, in order), or ok false when anything is not as
// the fast path expects.
func splitVersions(b []byte) (pairs [][2][]byte, size int, rest [][2]int, ok bool) {
	entries := 0
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, 0, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil, 0, nil, false
		}
		if num == initialVersionsField {
			entries++
		}
		i += n + m
	}
	pairs = make([][2][]byte, 0, entries)
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		start := i
		i += n + m
		if num != initialVersionsField {
			if k := len(rest) - 1; k >= 0 && rest[k][1] == start {
				rest[k][1] = i // the run goes on
			} else {
				rest = append(rest, [2]int{start, i})
			}
			continue
		}
		if typ != protowire.BytesType {
			return nil, 0, nil, false
		}
		v, _ := protowire.ConsumeBytes(b[start+n:])
		key, val, ok := versionEntry(v)
		if !ok {
			return nil, 0, nil, false
		}
		pairs = append(pairs, [2][]byte{key, val})
		size += len(key) + len(val)
	}
	return pairs, size, rest, true
}

// versionEntry decodes one map entry: key 1 and value 2, both strings of
// valid UTF-8, each at most once, nothing else. The key and value are
// e's own bytes.
func versionEntry(e []byte) (key, val []byte, ok bool) {
	seen := 0
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) || seen&(1<<num) != 0 {
			return nil, nil, false
		}
		seen |= 1 << num
		s, m := protowire.ConsumeBytes(e[n:])
		if m < 0 || !utf8.Valid(s) {
			return nil, nil, false
		}
		if num == 1 {
			key = s
		} else {
			val = s
		}
		e = e[n+m:]
	}
	return key, val, true
}
