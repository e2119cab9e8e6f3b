package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"sync"
	"weak"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Most proxies of a group subscribe to the same names and hold the same
// resources. The values here let every stream in the same state share one
// immutable copy of it, and let a push be planned once per group and
// snapshot transition instead of once per stream: a stream that holds
// exactly a set within its subscription moves to the next set by a shared
// list of what changed, in O(changes).

// Sharing is what streams in the same state share, one per server: the
// subscriptions and held contents (canons) interned, the transitions
// between them, and the VHDS alias indexes. Each cache keeps an entry only
// while some stream uses it.
type Sharing struct {
	subs   *subscriptions
	canons WeakCache[canonKey, Canon]
	// vhdsIndexes are the VHDS alias indexes by content (ContentAt),
	// shared by every stream answering aliases against it, kept while one
	// does (vhdsState holds its index).
	vhdsIndexes WeakCache[string, vhdsIndex]
}

// NewSharing returns an empty Sharing, for one server.
func NewSharing() *Sharing { return &Sharing{subs: newSubscriptions()} }

// WeakCache maps keys to values kept only while some stream uses them: an
// entry goes away after its value is garbage, so the cache needs no bound
// and no release calls.
type WeakCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]weak.Pointer[V]
}

// Get returns the live value for k, or stores and returns build's. build
// runs under the cache's lock: streams asking for the same value wait for
// one build rather than each making its own.
func (c *WeakCache[K, V]) Get(k K, build func() *V) *V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.m[k].Value(); v != nil {
		return v
	}
	v := build()
	if c.m == nil {
		c.m = map[K]weak.Pointer[V]{}
	}
	c.m[k] = weak.Make(v)
	runtime.AddCleanup(v, c.drop, k)
	return v
}

// drop removes k once its value is gone, unless a newer value took its place.
func (c *WeakCache[K, V]) drop(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[k]; ok && wp.Value() == nil {
		delete(c.m, k)
	}
}

// size is the number of entries, live or awaiting their cleanup.
func (c *WeakCache[K, V]) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Subscription is a client's subscription to one type, in either variant:
// immutable and shared by every stream subscribed to the same names.
type Subscription struct {
	Wildcard bool
	names    map[string]struct{} // never "*"; read-only
	// Globs are the names that are xdstp:// glob collections (X46), by
	// name; nil when there are none, as nearly always.
	Globs map[string]collection
	// sorted is names sorted, made once on first use (status reports).
	sortOnce sync.Once
	sorted   []string
}

// SortedNames returns the explicit names, sorted; shared, read-only.
func (s *Subscription) SortedNames() []string {
	if s == nil {
		return nil
	}
	s.sortOnce.Do(func() { s.sorted = slices.Sorted(maps.Keys(s.names)) })
	return s.sorted
}

// inCollection reports whether name is a member of one of the
// subscription's glob collections.
func (s *Subscription) inCollection(name string) bool {
	if s == nil {
		return false
	}
	for _, c := range s.Globs {
		if c.contains(name) {
			return true
		}
	}
	return false
}

// isGlob reports whether name is one of the subscription's glob
// collections.
func (s *Subscription) isGlob(name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.Globs[name]
	return ok
}

// eachMember calls fn for every member of the subscription's glob
// collections in set, each once (a name is in one collection at most: its
// prefix and parameters are those of one glob).
func (s *Subscription) eachMember(set *snapshot.Set, fn func(string)) {
	if s == nil {
		return
	}
	for _, c := range s.Globs {
		c.each(set, fn)
	}
}

// newSubscription is the subscription to the distinct names set.
func newSubscription(wildcard bool, set map[string]struct{}) *Subscription {
	s := &Subscription{Wildcard: wildcard, names: set}
	for n := range set {
		if c, ok := parseCollection(n); ok {
			if s.Globs == nil {
				s.Globs = map[string]collection{}
			}
			s.Globs[n] = c
		}
	}
	return s
}

// subscriptions interns subscriptions by an order-independent hash of
// their names, so that a new stream's thousand names are matched without
// sorting or copying them; a match is verified name by name. Entries go
// with their last user, like WeakCache's.
type subscriptions struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[subKey][]weak.Pointer[Subscription]
}

// subKey is a subscription's wildcard flag, the sum of its names' hashes
// and their number.
type subKey struct {
	wildcard bool
	sum      uint64
	count    int
}

func newSubscriptions() *subscriptions {
	return &subscriptions{seed: maphash.MakeSeed(), m: map[subKey][]weak.Pointer[Subscription]{}}
}

func (c *subscriptions) key(wildcard bool, names func(func(string) bool)) subKey {
	k := subKey{wildcard: wildcard}
	for n := range names {
		if n != wildcardName {
			k.sum += maphash.String(c.seed, n)
			k.count++
		}
	}
	return k
}

// get returns the shared subscription to names ("*" excluded) plus, if
// wildcard, everything.
func (c *subscriptions) get(wildcard bool, names []string) *Subscription {
	k := c.key(wildcard, slices.Values(names))
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.find(k, slices.Values(names)); s != nil {
		return s
	}
	set := make(map[string]struct{}, k.count)
	for _, n := range names {
		if n != wildcardName {
			set[n] = struct{}{}
		}
	}
	if len(set) != k.count {
		// Repeated names: the subscription is the distinct ones.
		k = c.key(wildcard, maps.Keys(set))
		if s := c.find(k, maps.Keys(set)); s != nil {
			return s
		}
	}
	s := newSubscription(wildcard, set)
	c.m[k] = append(c.m[k], weak.Make(s))
	runtime.AddCleanup(s, c.drop, k)
	return s
}

// find returns the live subscription under k holding exactly names.
func (c *subscriptions) find(k subKey, names func(func(string) bool)) *Subscription {
	for _, wp := range c.m[k] {
		s := wp.Value()
		if s == nil || len(s.names) != k.count {
			continue
		}
		match := true
		for n := range names {
			if _, ok := s.names[n]; !ok && n != wildcardName {
				match = false
				break
			}
		}
		if match {
			return s
		}
	}
	return nil
}

// drop forgets the subscriptions under k that are gone.
func (c *subscriptions) drop(k subKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.m[k][:0]
	for _, wp := range c.m[k] {
		if wp.Value() != nil {
			live = append(live, wp)
		}
	}
	if len(live) == 0 {
		delete(c.m, k)
		return
	}
	c.m[k] = live
}

// size is the number of subscriptions kept, live or awaiting cleanup.
func (c *subscriptions) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.m {
		n += len(l)
	}
	return n
}

// Canon is what a client holds of one type when it holds exactly a set's
// resources within a subscription: one immutable value for every stream in
// that state.
type Canon struct {
	set  *snapshot.Set
	sub  *Subscription
	held map[string]*snapshot.Resource // read-only
	// Names are held's names, sorted: the order of a response.
	Names []string
	// missing counts the subscription's explicit names not in the set.
	missing int
	// version is the version_info of a SotW response leaving a client
	// with exactly this canon: it identifies what the client holds, so
	// that a reconnecting client's version says what it has (X24).
	version string

	mu sync.Mutex
	// step is the latest transition computed from here: a push moves every
	// stream of a group from the same canon to the same next one. initial
	// is the transition to here from nothing.
	step, initial *Transition
	// all is every resource, wrapped for a response; sizes are the
	// encoded sizes of a SotW response holding them (without and with
	// TTLs), for what a spared resend saved (X24).
	all   wrapped
	sizes [2]struct {
		once sync.Once
		n    int
	}
	// types are the type URLs the resources refer to, sorted; ready
	// memoizes, per resource that must follow these ones and per state of
	// the client's ledgers of types, whether everything it names arrived.
	types []string
	ready map[arrivalKey]bool
}

// arrivalKey is a resource and the settled canons of the client's ledgers
// of its dependencies' reference types (in canon.types order; nil: the
// client does not have that type on this stream).
type arrivalKey struct {
	r    *snapshot.Resource
	deps [4]*Canon
}

// arrived reports, for a client that has ACKed exactly c and, of each of
// its types, exactly k.deps, whether every resource k.r must follow is in c
// with what it names: the same test as the planner's arrived.
func (c *Canon) arrived(k arrivalKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok, known := c.ready[k]; known {
		return ok
	}
	ok := true
	for _, ref := range k.r.Precede {
		a := c.held[ref.Name]
		if a == nil {
			ok = false
			break
		}
		for _, dep := range a.Refs {
			i, _ := slices.BinarySearch(c.types, dep.TypeURL)
			if d := k.deps[i]; d != nil && d.held[dep.Name] == nil {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
	}
	if c.ready == nil {
		c.ready = map[arrivalKey]bool{}
	}
	c.ready[k] = ok
	return ok
}

type canonKey struct {
	set *snapshot.Set
	sub *Subscription
}

// Transition is the difference between two canons of one subscription.
type Transition struct {
	to *Canon
	// changed are to's names that are new or at another version, sorted;
	// removed are from's names that to does not have, sorted.
	changed, removed []string
	// wrapped holds the changed resources, wrapped for a response.
	wrapped wrapped
}

// wrapped is a list of resources wrapped for responses, built once per
// variant (SotW or delta, with or without TTL, or the messages themselves
// for the status tracker) and shared read-only by every stream.
type wrapped struct {
	sotw     [2]lazyList[*anypb.Any]
	delta    [2]lazyList[*discoveryv3.Resource]
	messages lazyList[proto.Message]
}

// lazyList is a list built on first use.
type lazyList[T any] struct {
	once sync.Once
	list []T
}

// get returns the list of wrap(r) for the named resources of held.
func (l *lazyList[T]) get(names []string, held map[string]*snapshot.Resource, wrap func(*snapshot.Resource) T) []T {
	l.once.Do(func() {
		l.list = make([]T, len(names))
		for i, n := range names {
			l.list[i] = wrap(held[n])
		}
	})
	return l.list
}

func variant(ttl bool) int {
	if ttl {
		return 1
	}
	return 0
}

func (w *wrapped) forSotW(names []string, held map[string]*snapshot.Resource, ttl bool) []*anypb.Any {
	return w.sotw[variant(ttl)].get(names, held, func(r *snapshot.Resource) *anypb.Any { return r.ForSotW(ttl) })
}

func (w *wrapped) forDelta(names []string, held map[string]*snapshot.Resource, ttl bool) []*discoveryv3.Resource {
	return w.delta[variant(ttl)].get(names, held, func(r *snapshot.Resource) *discoveryv3.Resource { return r.ForDelta(ttl) })
}

func (w *wrapped) forStatus(names []string, held map[string]*snapshot.Resource) []proto.Message {
	return w.messages.get(names, held, func(r *snapshot.Resource) proto.Message { return r.Message })
}

// sotw and delta are the changed resources for a response.
func (t *Transition) sotw(ttl bool) []*anypb.Any {
	return t.wrapped.forSotW(t.changed, t.to.held, ttl)
}

func (t *Transition) delta(ttl bool) []*discoveryv3.Resource {
	return t.wrapped.forDelta(t.changed, t.to.held, ttl)
}

// Messages are the changed resources, for status.
func (t *Transition) Messages() []proto.Message {
	return t.wrapped.forStatus(t.changed, t.to.held)
}

// Messages are the canon's resources, for status.
func (c *Canon) Messages() []proto.Message { return c.all.forStatus(c.Names, c.held) }

// sotw is every resource of the canon for a response.
func (c *Canon) sotw(ttl bool) []*anypb.Any { return c.all.forSotW(c.Names, c.held, ttl) }

// SotWSize is the encoded size of the SotW response of typeURL holding
// every resource of the canon at its version (the nonce and control plane
// left out), measured once.
func (c *Canon) SotWSize(typeURL string, ttl bool) int {
	l := &c.sizes[variant(ttl)]
	l.once.Do(func() {
		l.n = proto.Size(&discoveryv3.DiscoveryResponse{VersionInfo: c.version, Resources: c.sotw(ttl), TypeUrl: typeURL})
	})
	return l.n
}

// canon returns the shared canon of set within sub.
func (s *Sharing) canon(set *snapshot.Set, sub *Subscription) *Canon {
	return s.canons.Get(canonKey{set, sub}, func() *Canon {
		c := &Canon{set: set, sub: sub}
		if sub.Wildcard {
			// Extra names under a wildcard add nothing that exists.
			c.Names = set.Names()
		} else {
			for n := range sub.names {
				if set.Get(n) != nil {
					c.Names = append(c.Names, n)
				}
			}
			sub.eachMember(set, func(n string) {
				if _, named := sub.names[n]; !named {
					c.Names = append(c.Names, n)
				}
			})
			slices.Sort(c.Names)
		}
		for n := range sub.names {
			// A glob is not a resource: it is never missing.
			if _, glob := sub.Globs[n]; !glob && set.Get(n) == nil {
				c.missing++
			}
		}
		c.held = make(map[string]*snapshot.Resource, len(c.Names))
		for _, n := range c.Names {
			r := set.Get(n)
			c.held[n] = r
			for _, ref := range r.Refs {
				if !slices.Contains(c.types, ref.TypeURL) {
					c.types = append(c.types, ref.TypeURL)
				}
			}
		}
		slices.Sort(c.types)
		// The canon's version identifies its content: the set's own when
		// it is the whole set (the names are the set's), else the hash of
		// its (name, version) pairs, computed once here for every stream
		// in this state.
		c.version = set.Version()
		if len(c.Names) != set.Len() {
			c.version = contentVersion(c.Names, c.held)
		}
		return c
	})
}

// contentVersion hashes the (name, version) pairs of held in the order of
// names (sorted), with the snapshot package's encoding of a set's version
// (each string length-prefixed, SHA-256, the first 8 bytes in hex): no two
// different contents share an encoding, the whole of a set hashes to the
// set's version, and the same content gets the same version on every
// replica and every restart.
func contentVersion(names []string, held map[string]*snapshot.Resource) string {
	h := sha256.New()
	var n [8]byte
	write := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, name := range names {
		write(name)
		write(held[name].Version)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// fromNothing is the transition to the canon of set within sub for a
// client that holds nothing yet: everything is new.
func (s *Sharing) fromNothing(set *snapshot.Set, sub *Subscription) *Transition {
	to := s.canon(set, sub)
	to.mu.Lock()
	defer to.mu.Unlock()
	if to.initial == nil {
		to.initial = &Transition{to: to, changed: to.Names}
	}
	return to.initial
}

// canonOf returns the shared canon of set within sub when m holds exactly
// that (by version), or nil. A stream that got there by its own path (a
// reconnect's initial versions, a released hold) joins the shared state.
func (s *Sharing) canonOf(m map[string]*snapshot.Resource, set *snapshot.Set, sub *Subscription) *Canon {
	if sub == nil {
		return nil
	}
	c := s.canon(set, sub)
	if len(c.held) != len(m) {
		return nil
	}
	for n, r := range m {
		if !sameVersion(c.held[n], r) {
			return nil
		}
	}
	return c
}

// sharedStep returns the group's transition toward set for a client whose
// ledger l holds a shared canon within sub, or nothing yet, with nothing
// forced; nil when it does not, or when make-before-break holds back
// something the transition changes. Removals are the caller's to check:
// they differ between the variants.
func (p *Planner) sharedStep(l *Ledger, sub *Subscription, forced bool, set *snapshot.Set) *Transition {
	var t *Transition
	switch from := l.HeldAs; {
	case from != nil && from.sub == sub && !forced:
		t = p.cfg.share.stepTo(from, set)
	case from == nil && len(l.Held) == 0 && sub != nil:
		// Nothing held yet, as on a first response: everything is new,
		// names just subscribed included.
		t = p.cfg.share.fromNothing(set, sub)
	default:
		return nil
	}
	for _, n := range t.changed {
		if r := t.to.held[n]; len(r.Precede) > 0 && p.mustWait(r) {
			return nil
		}
	}
	return t
}

// stepTo returns the transition from c to the canon of set within the same
// subscription, computing it once for every stream making the same move.
func (s *Sharing) stepTo(c *Canon, set *snapshot.Set) *Transition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.step != nil && c.step.to.set == set {
		return c.step
	}
	to := s.canon(set, c.sub)
	t := &Transition{to: to}
	for _, n := range to.Names {
		if !sameVersion(c.held[n], to.held[n]) {
			t.changed = append(t.changed, n)
		}
	}
	for _, n := range c.Names {
		if to.held[n] == nil {
			t.removed = append(t.removed, n)
		}
	}
	c.step = t
	return t
}
