package csds

import (
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/redact"
)

// maxCachedResources bounds the redacted resources kept: about two
// generations of this many (see anyCache).
const maxCachedResources = 4096

// anyCache maps a resource as sent to its redacted, packed form. The key
// is the message itself: the tracker holds the snapshot's messages, shared
// by every stream that was sent them and never modified, so one pointer is
// one (type, name, version); a new version is a new message. A key held
// here keeps its message alive, so a pointer is never reused for another
// resource while cached.
//
// It holds two generations: when the current one is full it becomes the
// previous one and the older is dropped, so entries still in use survive
// (a hit in the previous generation moves to the current one) and memory
// stays bounded at about 2*max entries, without per-entry bookkeeping.
type anyCache struct {
	mu        sync.Mutex
	max       int
	cur, prev map[proto.Message]*anypb.Any
}

func newAnyCache(maxEntries int) *anyCache {
	return &anyCache{max: maxEntries, cur: map[proto.Message]*anypb.Any{}}
}

// get returns m redacted and packed, nil when it cannot be packed. The
// result is shared: callers must not modify it.
func (c *anyCache) get(m proto.Message) *anypb.Any {
	c.mu.Lock()
	a, ok := c.cur[m]
	if !ok {
		if a, ok = c.prev[m]; ok {
			c.put(m, a)
		}
	}
	c.mu.Unlock()
	if ok {
		return a
	}
	// Redacted outside the lock: it is the expensive part, and two calls
	// racing on one message both produce the same result.
	a, err := anypb.New(redact.Message(m))
	if err != nil {
		return nil
	}
	c.mu.Lock()
	c.put(m, a)
	c.mu.Unlock()
	return a
}

// put adds an entry to the current generation, turning generations over
// when it is full. The caller holds mu.
func (c *anyCache) put(m proto.Message, a *anypb.Any) {
	if len(c.cur) >= c.max {
		c.prev, c.cur = c.cur, make(map[proto.Message]*anypb.Any, c.max)
	}
	c.cur[m] = a
}

// len is the number of entries held, for tests.
func (c *anyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}
