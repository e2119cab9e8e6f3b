package xds

import (
	"strings"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// initialVersionsField is DeltaDiscoveryRequest.initial_resource_versions.
const initialVersionsField protowire.Number = 5

// unmarshalDelta decodes a DeltaDiscoveryRequest into r (zero), reading
// initial_resource_versions itself: a reconnecting client presents a
// version for every resource it holds (2,000 entries for 1,000 clusters),
// and protobuf-go's reflective map decoding was more than half of the
// server's CPU in a fleet reconnect. The other fields go through
// proto.Unmarshal. Anything the fast path does not expect in the map
// (another wire type, another field, invalid UTF-8, a malformed entry) is
// left to proto.Unmarshal on the whole message, so the result, and any
// error, is proto.Unmarshal's.
func unmarshalDelta(b []byte, r *discoveryv3.DeltaDiscoveryRequest) error {
	pairs, size, rest, ok := splitVersions(b)
	if !ok {
		return proto.Unmarshal(b, r)
	}
	if err := proto.Unmarshal(rest, r); err != nil {
		return err
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
// values (pointing into b; size, their bytes together) and the other
// fields' bytes, or ok false when anything is not as the fast path
// expects.
func splitVersions(b []byte) (pairs [][2][]byte, size int, rest []byte, ok bool) {
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, 0, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil, 0, nil, false
		}
		field := b[i : i+n+m]
		i += n + m
		if num != initialVersionsField {
			if pairs != nil {
				rest = append(rest, field...)
			}
			continue
		}
		if typ != protowire.BytesType {
			return nil, 0, nil, false
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		key, val, ok := versionEntry(v)
		if !ok {
			return nil, 0, nil, false
		}
		if pairs == nil {
			// The fields before the first entry: b up to it.
			rest = append(make([]byte, 0, len(b)), b[:i-n-m]...)
		}
		pairs = append(pairs, [2][]byte{key, val})
		size += len(key) + len(val)
	}
	if pairs == nil {
		rest = b // no entries at all
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
