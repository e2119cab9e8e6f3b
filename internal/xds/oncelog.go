package xds

import "sync"

// onceSet remembers keys so that a message is logged once per key across
// streams: a proxy that reconnects and NACKs the same version again, or a
// storm of proxies in no group, does not flood the log. It is bounded: the
// oldest keys are forgotten first.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string
	next int
}

func newOnceSet(size int) *onceSet {
	return &onceSet{seen: map[string]struct{}{}, ring: make([]string, size)}
}

// first reports whether key is new, and remembers it.
func (o *onceSet) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[key]; ok {
		return false
	}
	if old := o.ring[o.next]; old != "" {
		delete(o.seen, old)
	}
	o.ring[o.next] = key
	o.next = (o.next + 1) % len(o.ring)
	o.seen[key] = struct{}{}
	return true
}
