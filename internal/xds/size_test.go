package xds

import (
	"testing"
	"unsafe"
)

// TestPerStreamStructsFitTheirSizeClass guards the memory every proxy
// costs: a stream and its four watches are allocated for each of ten
// thousand proxies, and a field more that takes a struct past its
// allocation size class costs the next class's whole step (the stream
// 576 to 640 bytes, a watch 256 to 288). Flags sit together for this.
func TestPerStreamStructsFitTheirSizeClass(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"stream", unsafe.Sizeof(stream{}), 576},
		{"sotwEntry", unsafe.Sizeof(sotwEntry{}), 448},   // a watch with its status record (liveType)
		{"deltaEntry", unsafe.Sizeof(deltaEntry{}), 416}, // a delta watch with its status record
		{"wakeups", unsafe.Sizeof(wakeups{}), 96},
		{"liveType", unsafe.Sizeof(liveType{}), 192},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, past its %d-byte size class: group its flags, or take a field every stream does not need out of it", c.name, c.size, c.max)
		}
	}
}
