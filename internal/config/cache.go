package config

import (
	"strings"
	"sync"
)

// Cache remembers what the previous loads decoded from JSON files, item by
// item (each raw resource, service, route table, listener, secret, gRPC
// target, group and route test), keyed by the item's exact text. Under
// endpoint churn a publish reads the same thousand items again with one
// changed (the store renders every object as a JSON file, and a generated
// config file is JSON): with the cache only the changed item is checked,
// parsed and decoded; an unchanged one costs a lookup of its text. A hit is the same decoded value with the file and line of this
// load, so a load with the cache returns what one without it would.
//
// Only successes are kept (a broken item is decoded again, for its
// diagnostics), and only for the load after the one that used them, so
// memory follows the config, not its history. YAML files are not cached: their
// items have no text of their own before the whole file is parsed. The
// decoded values are shared between loads and must not be modified. Safe
// for concurrent loads; the zero value is ready.
type Cache struct {
	mu    sync.Mutex
	items map[cacheKey]*cachedItem
	// load counts the loads ended; an item is kept while its used is
	// this load's or the last's. One map kept from load to load, not a
	// new one a load: a load of a thousand items would allocate and grow
	// it anew.
	load uint64
}

// cachedItem is one decoded value; its address is the Identity of the
// objects decoded from its text. used is the last load that used it.
type cachedItem struct {
	v    any
	used uint64
}

// Identity says which decoding through a Cache a model object is: two
// objects of loads through one Cache with the same non-zero Identity were
// decoded from the same text as the same kind, so are equal but for their
// Source (and, for a service, the endpoints JoinEndpoints appends). A
// compile keeps what it checked of an object by it. The zero Identity (an
// object of a YAML file, or decoded without a Cache) is the identity of
// nothing: such an object is checked every time. Holding an Identity
// keeps its decoded value, so its address is never reused for another.
type Identity struct{ item *cachedItem }

// Known reports whether id identifies a decoding (is not zero).
func (id Identity) Known() bool { return id.item != nil }

// cacheKey is an item's kind ("resource", "service", ...) and its text.
type cacheKey struct{ kind, text string }

// get returns the value decoded from text as kind by one of the last two
// loads, keeping it for the next.
func (c *Cache) get(kind, text string) (*cachedItem, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.items[cacheKey{kind, text}]
	if ok {
		item.used = c.load
	}
	return item, ok
}

// has reports whether one of the last two loads decoded text as kind: a
// look only, which keeps nothing for the next load (get does).
func (c *Cache) has(kind, text string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[cacheKey{kind, text}]
	return ok
}

// put records the value text decoded to, and returns its Identity. The
// text is copied: it is a piece of a file whose bytes the cache must not
// keep alive.
func (c *Cache) put(kind, text string, v any) Identity {
	if c == nil {
		return Identity{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[cacheKey]*cachedItem{}
	}
	item := &cachedItem{v: v, used: c.load}
	c.items[cacheKey{kind, strings.Clone(text)}] = item
	return Identity{item}
}

// done ends a load: what it did not use is forgotten after the next.
func (c *Cache) done() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, item := range c.items {
		if item.used != c.load {
			delete(c.items, k)
		}
	}
	c.load++
}

// cached returns the value of type T cached for text, if any, and its
// Identity.
func cached[T any](c *Cache, kind, text string) (T, Identity, bool) {
	item, ok := c.get(kind, text)
	if !ok {
		var zero T
		return zero, Identity{}, false
	}
	t, ok := item.v.(T)
	return t, Identity{item}, ok
}
