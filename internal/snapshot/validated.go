package snapshot

import (
	"crypto/sha256"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Validated remembers which resources passed validation in the previous
// builds, by a hash of their type and encoding, so that a build validates
// only what changed: a publish that moves one service's endpoints need not
// walk every other resource through ValidateAll again. Two messages with
// one deterministic encoding are one message, so they validate alike. Only
// successes are kept, and only those of the last two builds: memory
// follows the config, not its history. Safe for concurrent builds.
//
// It also keeps each input message's encoding for the next build, by the
// message's identity: a compile that hands the same message again (a raw
// resource or a service's translation reused because its text did not
// change) is not encoded and hashed again. So a message given to a build
// through a Validated must not be modified afterwards, which holds for
// every message a build is given: the snapshot serves them as they are.
type Validated struct {
	// KeysOnly keeps which resources passed and nothing else, for a
	// check whose snapshot is thrown away (a shard checking the whole
	// config for a write): every build encodes its messages again, but
	// what holds between builds is a key a resource, not the resources.
	// Set it before the first build.
	KeysOnly  bool
	mu        sync.Mutex
	cur, prev map[validKey]struct{}
	// encs: the encodings of the messages of the last build and this
	// one, each with the last build that used it (builds counts the
	// builds ended). One map kept from build to build, not a new one a
	// build: a build of a thousand resources would allocate and grow it
	// anew.
	encs   map[proto.Message]*keptEncoding
	builds uint64
	// sets are the last build's sets by type URL, which the next build
	// takes as they are where its resources of a type are the same.
	sets map[string]*Set
	// memo is the checks' memo of what each message type can hold,
	// handed from build to build (nil while a build holds it).
	memo *walkMemo
}

// walkMemo is what the value and key checks learn of message types (which
// can hold a value they look for): a type's answer never changes, so a
// build hands it to the next.
type walkMemo struct {
	holds map[protoreflect.FullName]bool
	keys  *redact.Finder
}

// takeMemo takes the memo the last build gave back, or a new one.
func (v *Validated) takeMemo() *walkMemo {
	if v != nil {
		v.mu.Lock()
		m := v.memo
		v.memo = nil
		v.mu.Unlock()
		if m != nil {
			return m
		}
	}
	return &walkMemo{holds: map[protoreflect.FullName]bool{}, keys: &redact.Finder{}}
}

// giveMemo gives m back for the next build.
func (v *Validated) giveMemo(m *walkMemo) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.memo = m
	v.mu.Unlock()
}

// lastSets are the last build's sets by type URL, nil if none.
func (v *Validated) lastSets() map[string]*Set {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sets
}

// keepSets keeps s's sets for the next build (not with KeysOnly: its
// snapshots are thrown away).
func (v *Validated) keepSets(s *Snapshot) {
	if v == nil || v.KeysOnly {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.sets = s.sets
}

// keptEncoding is an encoding and the last build that used it.
type keptEncoding struct {
	encoding
	used uint64
}

// encoding is a message's deterministic encoding and its SHA-256, and
// the Resource a build made of it, if any.
type encoding struct {
	b   []byte
	sum [sha256.Size]byte
	res *builtResource
}

// builtResource is a Resource and what it was built from besides its
// message: the same message under another name, type, TTL or registry
// is built again.
type builtResource struct {
	r    *Resource
	reg  *xdstype.Registry
	typ  *xdstype.Type
	name string
	ttl  time.Duration
}

// reuse returns the Resource built before of in's message, if it was
// built of it under in's name, type and TTL (and reg): a Resource is never
// changed once built, so builds share it, and a change to one object of a
// thousand does not rebuild the others' encoded forms and references.
// Only Resources that passed validation are kept, so one reused needs no
// validating either.
func (b *builtResource) reuse(reg *xdstype.Registry, in *xdstype.Resource) *Resource {
	if b == nil || b.reg != reg || b.typ != in.Type || b.name != in.Name || b.ttl != in.TTL {
		return nil
	}
	return b.r
}

// keepBuilt keeps r, built of in's message (encoded as e) and valid, for
// the next build.
func (v *Validated) keepBuilt(reg *xdstype.Registry, in *xdstype.Resource, e encoding, r *Resource) {
	e.res = &builtResource{r, reg, in.Type, in.Name, in.TTL}
	v.keepEncoding(in.Message, e)
}

// encode returns m's deterministic encoding and its hash, from the
// previous build when it encoded m (with the Resource built of it, if
// any).
func (v *Validated) encode(m proto.Message) (encoding, error) {
	if e, ok := v.encoded(m); ok {
		return e, nil
	}
	b, err := marshal.Marshal(m)
	if err != nil {
		return encoding{}, err
	}
	e := encoding{b: b, sum: sha256.Sum256(b)}
	v.keepEncoding(m, e)
	return e, nil
}

// encoded returns m's encoding from this build or the previous one,
// keeping it for the next.
func (v *Validated) encoded(m proto.Message) (encoding, bool) {
	if v == nil {
		return encoding{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	k, ok := v.encs[m]
	if !ok {
		return encoding{}, false
	}
	k.used = v.builds
	return k.encoding, true
}

func (v *Validated) keepEncoding(m proto.Message, e encoding) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keepEncodingLocked(m, e)
}

func (v *Validated) keepEncodingLocked(m proto.Message, e encoding) {
	if v.KeysOnly {
		return
	}
	if k, ok := v.encs[m]; ok {
		k.encoding, k.used = e, v.builds
		return
	}
	if v.encs == nil {
		v.encs = map[proto.Message]*keptEncoding{}
	}
	v.encs[m] = &keptEncoding{e, v.builds}
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
		v.cur = make(map[validKey]struct{}, len(v.prev))
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
	for m, k := range v.encs {
		if k.used != v.builds {
			delete(v.encs, m)
		}
	}
	v.builds++
}
