package status

import (
	"testing"
	"unsafe"
)

// A shard fills whole cache lines, and its fields (before the padding)
// lie within one, so that two cores on neighbouring shards do not share a
// line. The allocation's header (8 bytes) puts the shards a little past a
// line's start; the padding at each shard's end absorbs that.
func TestShardFillsCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n%64 != 0 {
		t.Fatalf("a shard is %d bytes, not a multiple of 64", n)
	}
	used := unsafe.Offsetof(shard{}.dropped) + unsafe.Sizeof(shard{}.dropped)
	tr := NewTracker(Options{})
	for i := range 2 {
		start := uintptr(unsafe.Pointer(&tr.shards[i])) % 64
		if start+used > 64 {
			t.Fatalf("shard %d's fields run from byte %d to %d of a cache line, into the next", i, start, start+used)
		}
	}
}
