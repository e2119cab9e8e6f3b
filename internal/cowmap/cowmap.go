// Package cowmap is a map that many goroutines read without a lock, for
// small, bounded sets of keys looked up on hot paths (metric children by
// type, shared names): it is never written once published, and an
// addition publishes a larger copy under a lock.
package cowmap

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Map is a copy-on-write map. The zero value is empty and ready.
type Map[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

// Load returns the map as it is now, nil while empty. It is read-only and
// never changes: index it directly (a lookup of string(b) for a []byte b
// then allocates nothing).
func (c *Map[K, V]) Load() map[K]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}

// LoadOrStore returns the value kept under k, or keeps v under k and
// returns it. Past limit keys, v is returned and not kept.
func (c *Map[K, V]) LoadOrStore(k K, v V, limit int) V {
	if x, ok := c.Load()[k]; ok {
		return x
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.Load()
	if x, ok := cur[k]; ok {
		return x
	}
	if len(cur) < limit {
		c.publish(cur, k, v)
	}
	return v
}

// Store keeps v under k, replacing what was kept; a new key is kept only
// below limit keys.
func (c *Map[K, V]) Store(k K, v V, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.Load()
	if _, known := cur[k]; known || len(cur) < limit {
		c.publish(cur, k, v)
	}
}

// publish replaces cur by a copy with k set to v; mu is held.
func (c *Map[K, V]) publish(cur map[K]V, k K, v V) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[K]V{}
	}
	next[k] = v
	c.m.Store(&next)
}
