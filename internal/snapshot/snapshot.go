// Package snapshot holds immutable, validated, content-versioned sets of xDS
// resources: content only. Which node gets which snapshot, and publishing
// them, is package fleet's.
//
// Each resource is marshalled once, deterministically, when a snapshot is
// built; the encoded Any is shared by every stream that sends it, and its
// hash is the resource's version. A type's version hashes its (name,
// version) pairs and a snapshot's version hashes its types, so identical
// content gets identical versions on every restart and every replica.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Resource is one encoded resource. It is shared between snapshots and
// streams and must not be modified.
type Resource struct {
	Name    string
	Version string     // content hash of the deterministic encoding (and TTL)
	Any     *anypb.Any // the encoding, sent as is on every stream
	// Delta is the resource as incremental xDS sends it (name, version, TTL
	// and the same encoding), built once so delta streams share it too.
	Delta   *discoveryv3.Resource
	Message proto.Message // the decoded form, for dumps and checks
	// Refs are the resources this one names, read once at build time.
	Refs []xdstype.Ref
	// Precede are the Refs whose type must reach a client first (see
	// xdstype.Type.MustPrecede): what make-before-break holds this for.
	Precede []xdstype.Ref
	// precedeType is the type all of Precede are of, "" if several.
	precedeType string
	// TTL is nil for a resource without one.
	TTL *durationpb.Duration

	// For resources with a TTL: the forms for clients without TTL support,
	// for state-of-the-world clients that unwrap Resource, and heartbeats.
	plain        *discoveryv3.Resource
	wrapped      *anypb.Any
	heartbeat    *discoveryv3.Resource
	heartbeatAny *anypb.Any
}

// PrecedeType is the type every one of Precede is of, read once at build
// time: "" when they are of several types or there are none. A route
// naming a hundred clusters is checked per stream on every route change.
func (r *Resource) PrecedeType() string { return r.precedeType }

// ForDelta is the resource as a delta response carries it; without ttl
// support the TTL is left out.
func (r *Resource) ForDelta(ttl bool) *discoveryv3.Resource {
	if r.TTL != nil && !ttl {
		return r.plain
	}
	return r.Delta
}

// ForSotW is the resource as a state-of-the-world response carries it: the
// plain encoding, or, for a client that supports TTLs and unwraps Resource
// in state of the world, a Resource carrying the TTL.
func (r *Resource) ForSotW(ttl bool) *anypb.Any {
	if r.TTL != nil && ttl {
		return r.wrapped
	}
	return r.Any
}

// Heartbeat is the TTL refresh for the resource: a Resource with its name,
// version and TTL but no payload. Nil for a resource without a TTL.
func (r *Resource) Heartbeat() *discoveryv3.Resource { return r.heartbeat }

// HeartbeatSotW is Heartbeat wrapped for a state-of-the-world response.
func (r *Resource) HeartbeatSotW() *anypb.Any { return r.heartbeatAny }

// Set is the resources of one type in a snapshot.
type Set struct {
	typ     *xdstype.Type
	version string
	byName  map[string]*Resource
	names   []string // sorted
	ttl     []string // sorted names of the resources with a TTL
	minTTL  time.Duration
}

// A nil *Set is a valid empty set: the methods below all accept it.

// Type returns the set's resource type.
func (s *Set) Type() *xdstype.Type {
	if s == nil {
		return nil
	}
	return s.typ
}

// Version is the hash over the set's (name, version) pairs.
func (s *Set) Version() string {
	if s == nil {
		return ""
	}
	return s.version
}

// Len is the number of resources in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

// Get returns the named resource, or nil.
func (s *Set) Get(name string) *Resource {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// TTLNames returns the sorted names of the resources that have a TTL. Do
// not modify the slice.
func (s *Set) TTLNames() []string {
	if s == nil {
		return nil
	}
	return s.ttl
}

// Names returns the resource names in sorted order. Do not modify the slice.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return s.names
}

// Snapshot is an immutable set of resources of every registered type.
type Snapshot struct {
	version string
	// configVersion is version leaving out the endpoints (ConfigVersion).
	configVersion string
	sets          map[string]*Set
	ranked        []*Set
	minTTL        time.Duration
	// secrets is the secret policy published with the snapshot
	// (WithSecretPolicy), cut to its own Secrets: a snapshot that outlives
	// its config, as a staged rollout's previous one does, is still
	// entitled by the policy it was published with.
	secrets map[string][]string
}

// MinTTL is the shortest TTL of any resource in the snapshot, zero if none
// has one. Streams send heartbeats at half of it.
func (s *Snapshot) MinTTL() time.Duration {
	if s == nil {
		return 0
	}
	return s.minTTL
}

// Version is the hash over every type's version.
func (s *Snapshot) Version() string { return s.version }

// Set returns the resources of the type with the given URL; nil (an empty
// set) if the type is not registered or the snapshot is nil.
func (s *Snapshot) Set(typeURL string) *Set {
	if s == nil {
		return nil
	}
	return s.sets[typeURL]
}

// Sets returns every set in make-before-break order. Do not modify the slice.
func (s *Snapshot) Sets() []*Set { return s.ranked }

func hashBytes(b []byte) string { return versionOf(sha256.Sum256(b)) }

// versionOf is the version cut from a SHA-256: every version is one.
func versionOf(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:8]) }

// HashPairs hashes (key, value) pairs, already in a stable order, as every
// version is: a snapshot's over its sets, a fleet's over its groups' and
// rules. Lengths are written so that no two different lists share an
// encoding.
func HashPairs(pairs [][2]string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range pairs {
		for _, s := range p {
			l := len(s)
			for i := range n {
				n[i] = byte(l >> (8 * i))
			}
			h.Write(n[:])
			h.Write([]byte(s))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func newSet(t *xdstype.Type, byName map[string]*Resource) *Set {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	pairs := make([][2]string, len(names))
	set := &Set{typ: t, byName: byName, names: names}
	for i, n := range names {
		r := byName[n]
		pairs[i] = [2]string{n, r.Version}
		if r.TTL != nil {
			set.ttl = append(set.ttl, n)
			if d := r.TTL.AsDuration(); set.minTTL == 0 || d < set.minTTL {
				set.minTTL = d
			}
		}
	}
	set.version = HashPairs(pairs)
	return set
}

func newSnapshot(reg *xdstype.Registry, byType map[string]map[string]*Resource) *Snapshot {
	return newSnapshotAfter(reg, byType, nil)
}

// newSnapshotAfter is newSnapshot, taking from last (the sets of the build
// before, by type URL; nil: none) each set whose resources are the very
// ones of byType's: a change to one object of a thousand does not sort
// and hash the names of every other type's resources again.
func newSnapshotAfter(reg *xdstype.Registry, byType map[string]map[string]*Resource, last map[string]*Set) *Snapshot {
	var ranked []*Set
	for _, t := range reg.Ranked() {
		if prev := last[t.URL]; prev != nil && prev.typ == t && prev.holdsJust(byType[t.URL]) {
			ranked = append(ranked, prev)
			continue
		}
		ranked = append(ranked, newSet(t, byType[t.URL]))
	}
	return fromRanked(ranked)
}

// holdsJust reports whether s holds exactly the resources of byName, the
// very ones (a Resource is never changed once built).
func (s *Set) holdsJust(byName map[string]*Resource) bool {
	if len(s.byName) != len(byName) {
		return false
	}
	for n, r := range s.byName {
		if byName[n] != r {
			return false
		}
	}
	return true
}

// fromRanked is the snapshot of the sets, in make-before-break order: its
// versions (with and without the endpoints) and shortest TTL.
func fromRanked(ranked []*Set) *Snapshot {
	s := &Snapshot{sets: make(map[string]*Set, len(ranked)), ranked: ranked}
	pairs := make([][2]string, 0, len(ranked))
	config := make([][2]string, 0, len(ranked))
	for _, set := range ranked {
		s.sets[set.typ.URL] = set
		pairs = append(pairs, [2]string{set.typ.URL, set.version})
		if set.typ.URL != xdstype.EndpointURL {
			config = append(config, [2]string{set.typ.URL, set.version})
		}
		if set.minTTL > 0 && (s.minTTL == 0 || set.minTTL < s.minTTL) {
			s.minTTL = set.minTTL
		}
	}
	s.version, s.configVersion = HashPairs(pairs), HashPairs(config)
	return s
}

// withSet is s with set in place of its set of the same type; the others
// are s's, shared.
func (s *Snapshot) withSet(set *Set) *Snapshot {
	ranked := slices.Clone(s.ranked)
	for i, old := range ranked {
		if old.typ.URL == set.typ.URL {
			ranked[i] = set
		}
	}
	out := fromRanked(ranked)
	out.secrets = s.secrets
	return out
}

// WithSecretPolicy returns s with the secret policy it is published with:
// glob patterns of the verified identities that may receive each named
// Secret (nodegroup.AnyMatch); a Secret not named is open to every verified
// node of its group. Only the entries of s's own Secrets are kept. The
// sets are s's, shared; s itself is returned when there is nothing to
// keep and s has no policy.
func (s *Snapshot) WithSecretPolicy(policy map[string][]string) *Snapshot {
	secrets := s.Set(xdstype.SecretURL)
	kept := map[string][]string{}
	for name, patterns := range policy {
		if secrets.Get(name) != nil {
			kept[name] = patterns
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	if len(kept) == 0 && len(s.secrets) == 0 {
		return s
	}
	out := *s
	out.secrets = kept
	return &out
}

// SecretPolicy returns the policy s was published with, cut to its own
// Secrets (WithSecretPolicy). Do not modify it.
func (s *Snapshot) SecretPolicy() map[string][]string {
	if s == nil {
		return nil
	}
	return s.secrets
}
