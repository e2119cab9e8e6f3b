package snapshot

import (
	"crypto/sha256"
	"sync"
)

// Validated remembers which resources passed validation in the previous
// builds, by a hash of their type and encoding, so that a build validates
// only what changed: a publish that moves one service's endpoints need not
// walk every other resource through ValidateAll again. Two messages with
// one deterministic encoding are one message, so they validate alike. Only
// successes are kept, and only those of the last two builds: memory
// follows the config, not its history. Safe for concurrent builds.
type Validated struct {
	mu        sync.Mutex
	cur, prev map[validKey]struct{}
}

// validKey is a resource's type and the SHA-256 of its encoding (the hash
// its version is cut from: computed once per resource).
type validKey struct {
	typeURL string
	sum     [sha256.Size]byte
}

// seen reports whether k passed in the last two builds, keeping it for
// the next.
func (v *Validated) seen(k validKey) bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cur[k]; ok {
		return true
	}
	if _, ok := v.prev[k]; ok {
		v.keep(k)
		return true
	}
	return false
}

// passed records that k passed validation in this build.
func (v *Validated) passed(k validKey) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keep(k)
}

func (v *Validated) keep(k validKey) {
	if v.cur == nil {
		v.cur = map[validKey]struct{}{}
	}
	v.cur[k] = struct{}{}
}

// done ends a build: what it did not see is forgotten after the next.
func (v *Validated) done() {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.prev, v.cur = v.cur, nil
}
