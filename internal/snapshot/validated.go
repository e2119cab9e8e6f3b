package snapshot

import (
	"crypto/sha256"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

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
	mu        sync.Mutex
	cur, prev map[validKey]struct{}
	// encCur, encPrev: the encodings of this build's and the previous
	// build's messages.
	encCur, encPrev map[proto.Message]encoding
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

// resource returns in's Resource (its encoding b of SHA-256 sum), the
// previous build's when it built one of the same message, name, type and
// TTL: a Resource is never changed once built, so builds share it, and a
// change to one object of a thousand does not rebuild the others' encoded
// forms and references.
func (v *Validated) resource(reg *xdstype.Registry, in *xdstype.Resource, b []byte, sum [sha256.Size]byte) (*Resource, error) {
	if e, ok := v.encoded(in.Message); ok && e.res != nil {
		if p := e.res; p.reg == reg && p.typ == in.Type && p.name == in.Name && p.ttl == in.TTL && e.sum == sum {
			return p.r, nil
		}
	}
	r, err := newResource(reg, in, b, sum)
	if err != nil {
		return nil, err
	}
	v.keepEncoding(in.Message, encoding{b, sum, &builtResource{r, reg, in.Type, in.Name, in.TTL}})
	return r, nil
}

// encode returns m's deterministic encoding and its hash, from the
// previous build when it encoded m.
func (v *Validated) encode(m proto.Message) ([]byte, [sha256.Size]byte, error) {
	if e, ok := v.encoded(m); ok {
		return e.b, e.sum, nil
	}
	b, err := marshal.Marshal(m)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	e := encoding{b: b, sum: sha256.Sum256(b)}
	v.keepEncoding(m, e)
	return e.b, e.sum, nil
}

// encoded returns m's encoding from this build or the previous one,
// keeping it for the next.
func (v *Validated) encoded(m proto.Message) (encoding, bool) {
	if v == nil {
		return encoding{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.encCur[m]
	if !ok {
		if e, ok = v.encPrev[m]; ok {
			v.keepEncodingLocked(m, e)
		}
	}
	return e, ok
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
	if v.encCur == nil {
		v.encCur = map[proto.Message]encoding{}
	}
	v.encCur[m] = e
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
	v.encPrev, v.encCur = v.encCur, nil
}
