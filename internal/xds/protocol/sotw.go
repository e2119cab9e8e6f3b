package protocol

import (
	"slices"
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// wildcardName is the explicit wildcard subscription.
const wildcardName = "*"

// Watch is one stream's state-of-the-world state for one resource type: what
// the client subscribed to, what it holds, and whether a response is owed.
// It is a plain value owned by the stream's loop; nothing here touches gRPC.
// What the client holds is usually a group's shared state (shared.go), so
// its own size is small.
type Watch struct {
	TypeState

	// Warm is set on ADS when a response of the type this one warms (CDS for
	// EDS, LDS for RDS) was sent: Envoy finishes warming only on a fresh
	// response, so the next request is answered even if nothing changed.
	Warm bool

	Nonce string // latest nonce sent for the type; "" before the first response
	// SetVersion is the version of the type's whole set that the latest
	// response was planned from, ackedSet that of the latest one ACKed:
	// the version a publish introduced, which push latency is measured
	// against (a subscription to part of the set has a version of its
	// own, see heldVersion).
	SetVersion, AckedSet string
}

// NewWatch is a state-of-the-world stream's state for type t, before a
// request.
func NewWatch(t *xdstype.Type, shared *Sharing) Watch {
	return Watch{TypeState: TypeState{Type: t, shared: shared}}
}

// RequestKind says what a request meant for its type.
type RequestKind int

const (
	ReqStale   RequestKind = iota // response_nonce is not the latest: ignored
	ReqInitial                    // the first request for the type
	ReqUpdate                     // a later request before any response of the type
	ReqACK
	ReqNACK
)

// OnRequest applies a state-of-the-world request to the watch and reports
// what it was and whether a response is now owed.
func (w *Watch) OnRequest(req *discoveryv3.DiscoveryRequest, snap *snapshot.Snapshot) (RequestKind, bool) {
	var kind RequestKind
	switch {
	case w.Sent && req.GetResponseNonce() != w.Nonce:
		// A response the client has not seen yet supersedes this request; the
		// client will send a request carrying its nonce (X14).
		return ReqStale, false
	case !w.Started:
		kind = ReqInitial
	case !w.Sent:
		kind = ReqUpdate
	case req.GetErrorDetail() != nil:
		// A NACK is told by error_detail alone, never by comparing versions
		// (X10): its version_info is what the client still runs (X11). The
		// client rejected the whole response and keeps what it had ACKed.
		kind = ReqNACK
		for n, r := range w.Held {
			if !sameVersion(w.Acked[n], r) {
				w.reject(n, r)
			}
		}
		w.Moving = InFlight{}
		w.Synced = true
	default:
		kind = ReqACK
		w.AckedVersion, w.AckedSet = w.Version, w.SetVersion
		w.Acked, w.AckedAs = w.Held, w.HeldAs
		w.Nacked = nil
		// The latest response answers for every earlier one.
		w.Moving = InFlight{}
		w.Synced = true
	}

	first := !w.Started
	w.Started = true
	added, changed := w.subscribe(req.GetResourceNames(), first)

	set := snap.Set(w.Type.URL)
	owe := false
	switch {
	case first:
		// The full-state types always answer the first request, even with no
		// resources: that is how a client learns its names do not exist.
		owe = w.Type.FullState || w.hasAny(set)
	case changed && w.Type.FullState:
		owe = true
	case len(added) > 0:
		// A newly subscribed name is sent even if the client had it before at
		// the same version (X17): the client dropped it on unsubscribe.
		owe = anyExists(set, added)
	}
	if w.Warm && kind != ReqNACK {
		owe = true
	}
	if !w.Type.FullState && !w.hasAny(set) {
		// An empty response for a per-resource type means nothing (X22), and
		// Envoy reads it as an assignment gone missing; say nothing instead.
		owe = false
	}
	return kind, owe
}

// subscribe applies resource_names and returns the names newly added ("*"
// when the wildcard is) and whether the subscription changed.
func (w *Watch) subscribe(names []string, first bool) (added []string, changed bool) {
	if !first && w.same(names) {
		// The common case, an ACK repeating the subscription: nothing to
		// rebuild (an EDS ACK may carry thousands of names).
		return nil, false
	}
	star := slices.Contains(names, wildcardName)
	wildcard, legacy := star, false
	if len(names) == 0 && w.Type.Wildcard && (first || w.legacy) {
		// The legacy wildcard: an empty first request, kept while later
		// requests stay empty (X19). After an explicit subscription an empty
		// list means no resources (X18).
		wildcard, legacy = true, true
	}
	sub := w.shared.subs.get(wildcard, names)
	if len(w.Names) == 0 {
		added = make([]string, 0, len(sub.names)+1)
	}
	for n := range sub.names {
		if _, ok := w.Names[n]; !ok {
			added = append(added, n)
			if _, has := w.Held[n]; !has {
				// Not held (the client dropped it on unsubscribing): it
				// is sent anyway.
				continue
			}
			if w.force == nil {
				w.force = map[string]struct{}{}
			}
			w.force[n] = struct{}{}
		}
	}
	changed = sub != w.Sub
	if wildcard && !w.Wildcard {
		added = append(added, wildcardName)
	}
	w.Wildcard, w.legacy = wildcard, legacy
	w.Sub, w.Names = sub, sub.names
	if changed {
		w.Settled = ""
		// The client drops what it no longer subscribes to, so it no longer
		// holds or has ACKed it. The maps may be shared: filter into new
		// ones.
		w.Held, w.Acked = w.within(w.Held), w.within(w.Acked)
		w.HeldAs, w.AckedAs = nil, nil
	}
	return added, changed
}

// within returns the part of m the subscription covers.
func (w *Watch) within(m map[string]*snapshot.Resource) map[string]*snapshot.Resource {
	out := make(map[string]*snapshot.Resource, len(m))
	for n, r := range m {
		if w.Covers(n) {
			out[n] = r
		}
	}
	return out
}

// Repeats reports whether a request naming names leaves the started
// watch's subscription as it is (as OnRequest would find it): what a
// relay's subscription hook skips for the ACKs that repeat it, without
// building the names' set.
func (w *Watch) Repeats(names []string) bool { return w.Started && w.same(names) }

// same reports whether names is exactly the current subscription.
func (w *Watch) same(names []string) bool {
	star := false
	count := 0
	for _, n := range names {
		if n == wildcardName {
			star = true
			continue
		}
		if _, ok := w.Names[n]; !ok {
			return false
		}
		count++
	}
	legacy := len(names) == 0 && w.Type.Wildcard && w.legacy
	return count == len(w.Names) && (star || legacy) == w.Wildcard && (star || legacy || !w.Wildcard) && legacy == w.legacy
}

func anyExists(set *snapshot.Set, names []string) bool {
	for _, n := range names {
		if n == wildcardName && set.Len() > 0 || set.Get(n) != nil {
			return true
		}
	}
	return false
}

// hasAny reports whether the client's subscription matches any resource.
func (w *Watch) hasAny(set *snapshot.Set) bool {
	if w.Wildcard {
		return set.Len() > 0
	}
	for n := range w.Names {
		if set.Get(n) != nil {
			return true
		}
	}
	found := false
	w.Sub.eachMember(set, func(string) { found = true })
	return found
}

// Outcome is a plan: what the client should hold of the type after the next
// response.
type Outcome struct {
	Next map[string]*snapshot.Resource
	// As is set when next is as.held: exactly the set within the
	// subscription, shared with every stream in that state.
	As *Canon
	// step is set when next was reached from the held canon by the group's
	// shared transition: what changed is listed there.
	step *Transition
	// missing is set when a name the client subscribes to is in the set
	// but not in next (held back): next is then not the set's version of
	// the subscription, whatever it holds.
	missing bool
}

// Plan returns what the client should hold of the type after the next
// response, and whether that differs from what it holds in a way worth a
// response. It follows the snapshot except where make-before-break says
// otherwise: a resource naming a cluster the client does not have yet keeps
// its previous version (or stays away), and a full-state resource that is
// gone stays while something the client holds still names it.
func (w *Watch) Plan(p *Planner, set *snapshot.Set) (Outcome, bool) {
	if o, changed, ok := w.planShared(p, set); ok {
		return o, changed
	}
	next := make(map[string]*snapshot.Resource, max(len(w.Held), len(w.Names)))
	missing := false
	consider := func(n string) {
		if _, done := next[n]; done || !w.Covers(n) {
			return
		}
		r, cur := set.Get(n), w.Held[n]
		_, forced := w.force[n]
		switch {
		case r == nil:
			_, named := w.Names[n]
			if cur != nil && w.Type.FullState && p.keep(w.Type, n, named) {
				next[n] = cur
			}
		case sameVersion(cur, r) && !forced:
			next[n] = r
		case !p.mustWait(r):
			next[n] = r
		case cur != nil:
			next[n] = cur
		default:
			// A new resource held back: the client lacks a name of the
			// set it subscribes to.
			missing = true
		}
	}
	if w.Wildcard {
		for _, n := range set.Names() {
			consider(n)
		}
	} else {
		w.Sub.eachMember(set, consider)
	}
	for n := range w.Names {
		consider(n)
	}
	for n := range w.Held {
		consider(n)
	}
	o := Outcome{Next: next, missing: missing}
	if c := w.shared.canonOf(next, set, w.Sub); c != nil {
		// The client gets exactly the set: share the group's copy, and let
		// the next push take the shared transition.
		o = Outcome{Next: c.held, As: c}
	}
	if !w.Type.FullState && len(next) == 0 {
		// Nothing to say: an empty response for a per-resource type changes
		// nothing (X22).
		return o, false
	}
	if !w.Sent {
		return o, true
	}
	for n, r := range next {
		if !sameVersion(w.Held[n], r) {
			return o, true
		}
	}
	// For the full-state types a resource gone from the set is a change
	// (absence deletes, X22); for the others a client keeps what is not
	// resent, so a deletion alone is not worth a response.
	return o, w.Type.FullState && len(next) != len(w.Held)
}

// planShared is plan for the common case, in O(changes): the client holds
// exactly the previous set within its subscription, so the group's shared
// transition to the new set says what changes. It declines (ok false)
// whenever make-before-break would hold something back or keep something,
// and for names just subscribed: the full plan handles those.
func (w *Watch) planShared(p *Planner, set *snapshot.Set) (o Outcome, changed, ok bool) {
	t := p.sharedStep(&w.Ledger, w.Sub, len(w.force) > 0, set)
	if t == nil {
		return Outcome{}, false, false
	}
	if w.Type.FullState {
		for _, n := range t.removed {
			if _, named := w.Names[n]; p.keep(w.Type, n, named) {
				return Outcome{}, false, false
			}
		}
	}
	o = Outcome{Next: t.to.held, As: t.to, step: t}
	switch {
	case !w.Type.FullState && len(t.to.held) == 0:
		return o, false, true
	case !w.Sent:
		return o, true, true
	}
	return o, len(t.changed) > 0 || w.Type.FullState && len(t.removed) > 0, true
}

// Response builds the response giving the client o.next, each resource
// encoded once in the snapshot and shared here (X8: names are unique, from
// a map). Its version identifies what the client holds after it
// (heldVersion).
//
// For Listener and Cluster the response holds every resource the client
// should have. For the other types it holds only what is new or changed
// (and names just subscribed to): the client keeps the rest (X22), so one
// changed assignment among a thousand costs one assignment on the wire. A
// response that warms a cluster or listener (X38) holds them all.
func (w *Watch) Response(o Outcome, nonce string, ttl bool) *discoveryv3.DiscoveryResponse {
	next := o.Next
	var names []string
	if o.As != nil {
		names = o.As.Names
	} else {
		names = make([]string, 0, len(next))
		for n := range next {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	whole := w.Type.FullState || w.Warm || !w.Sent
	var resources []*anypb.Any
	switch {
	case o.step != nil && !whole:
		// Only what changed, from the shared transition (nothing is
		// forced on this path).
		resources = o.step.sotw(ttl)
	case o.As != nil && whole:
		resources = o.As.sotw(ttl)
	default:
		resources = make([]*anypb.Any, 0, len(names))
		for _, n := range names {
			_, forced := w.force[n]
			if whole || forced || !sameVersion(w.Held[n], next[n]) {
				resources = append(resources, next[n].ForSotW(ttl))
			}
		}
	}
	version := heldVersion(o, names)
	// Only a name the client has ACKed needs counting as in flight: the
	// others have not arrived anyway, and in state of the world acked
	// changes only by an answer to the latest response, which ends every
	// count. A first response, the largest, counts nothing.
	if o.step != nil {
		for _, n := range o.step.changed {
			w.bumpAcked(n)
		}
		for _, n := range o.step.removed {
			w.bumpAcked(n)
		}
	} else {
		for n, r := range next {
			if !sameVersion(w.Held[n], r) {
				w.bumpAcked(n)
			}
		}
		for n := range w.Held {
			if next[n] == nil {
				w.bumpAcked(n)
			}
		}
	}
	w.Held, w.HeldAs = next, o.As
	w.force = nil
	w.Nonce, w.Version, w.Sent = nonce, version, true
	w.Warm = false
	return &discoveryv3.DiscoveryResponse{
		VersionInfo: version,
		Resources:   resources,
		TypeUrl:     w.Type.URL,
		Nonce:       nonce,
	}
}

// heldVersion is the version_info of a response leaving the client with
// o.next (names: its names, sorted): one that identifies exactly what the
// client holds of the type, so that a client reconnecting with it can be
// spared what it has (X24). Where the outcome is a shared canon (exactly
// the set within the subscription) it is the canon's, computed once for
// every stream in that state: the set's version for the whole set. Any
// other outcome holds something back or keeps something gone for
// make-before-break; it is hashed here, per stream, and marked "partial-"
// so that it never equals a version the set itself gives a subscription
// (nor, then, one a reconnect is spared for).
func heldVersion(o Outcome, names []string) string {
	if o.As != nil {
		return o.As.version
	}
	return "partial-" + contentVersion(names, o.Next)
}

// Adopt records o, a canon, as the client's latest response and ACKed:
// what a reconnecting client spared the resend already has (X24). The
// nonce stays "": nothing was sent on this stream, so the client's next
// request of the type carries none and reads as an ACK of this, not as a
// stale request. The client's holdings count as settled, so that make-
// before-break holds back for it what it would for a client that ACKed.
func (w *Watch) Adopt(o Outcome, set *snapshot.Set) {
	w.Held, w.HeldAs = o.Next, o.As
	w.Acked, w.AckedAs = o.Next, o.As
	w.Version, w.AckedVersion = o.As.version, o.As.version
	w.SetVersion, w.AckedSet = set.Version(), set.Version()
	w.Nonce, w.Sent = "", true
	w.Synced = true
	w.force, w.Warm = nil, false
	w.Moving, w.Nacked = InFlight{}, nil
}

func (w *Watch) bumpAcked(n string) {
	if w.Acked[n] != nil {
		w.bump(n)
	}
}

// Heartbeat builds a response refreshing the TTL of every resource with one
// that the client holds at its current version, or returns nil if there is
// none (X41). Heartbeats are not updates: what the client holds is unchanged.
//
// Only what the client ACKed is held: after a NACK it still runs what it
// had, and a heartbeat naming the version it rejected is, to Envoy, an
// update without its resource rather than a refresh. Until it ACKs the
// type's latest response nothing is refreshed (the response carries the
// TTLs itself); an ACK of a heartbeat sent meanwhile would otherwise read
// as an ACK of everything sent.
func (w *Watch) Heartbeat(set *snapshot.Set, nonce string) *discoveryv3.DiscoveryResponse {
	if !w.Sent || w.AckedVersion != w.Version {
		return nil
	}
	var resources []*anypb.Any
	for _, n := range set.TTLNames() {
		if r := set.Get(n); sameVersion(w.Held[n], r) && sameVersion(w.Acked[n], r) {
			resources = append(resources, r.HeartbeatSotW())
		}
	}
	if len(resources) == 0 {
		return nil
	}
	w.Nonce = nonce
	return &discoveryv3.DiscoveryResponse{VersionInfo: w.Version, Resources: resources, TypeUrl: w.Type.URL, Nonce: nonce}
}

// Warms is the type whose resources Envoy waits for after a response of
// typeURL (X38): a cluster warms until it gets a fresh assignment, a
// listener until it gets a fresh route configuration. "" for none.
func Warms(typeURL string) string {
	switch typeURL {
	case xdstype.ClusterURL:
		return xdstype.EndpointURL
	case xdstype.ListenerURL:
		return xdstype.RouteURL
	}
	return ""
}

// warmed reports whether typeURL is one a response of another type warms.
func warmed(typeURL string) bool {
	return typeURL == Warms(xdstype.ClusterURL) || typeURL == Warms(xdstype.ListenerURL)
}

// StreamTraits is what the stream tells SparesResend about itself and the
// type's history on it.
type StreamTraits struct {
	PerType bool // a per-type stream, not ADS
	Quiet   bool // one REST poll (ServeStream): it owes no first message
	TTL     bool // the client reads resource TTLs in state of the world
	// Warmed is set when a response on this stream warmed the type
	// (X38), before or since the client first asked for it.
	Warmed bool
}

// SparesResend reports whether the response o planned for a type t's first request
// on this stream can be left unsent because the client already holds it
// (X24): a reconnecting client's first request carries the version_info
// of the last response it accepted, and no response_nonce (nothing was
// sent on this stream). Versions identify exactly what a client holds
// (heldVersion), so an equal version means equal content, on this replica
// or any other. Not spared, because the client may need the response all
// the same:
//   - a request carrying error_detail: the client rejected something and
//     may hold part of it, which its version does not say;
//   - a Listener or Cluster subscription naming something the set lacks:
//     the response is how the client learns at once that it does not
//     exist (X22), rather than when its does-not-exist timer fires;
//   - a plan that holds anything back or keeps anything for
//     make-before-break (not a canon, or heldBack): the client must end
//     up with what the plan says, and gets it on the way out of the hold;
//   - a type a response warmed on this stream (X38: after clusters are
//     resent, Envoy waits for fresh assignments), and on per-type streams
//     the warmed types (EDS, RDS) always, since the stream cannot see
//     whether the node's clusters or listeners were resent on another;
//   - resources with a TTL for a client that uses them: the resend is what
//     refreshes the TTL the client counts down, and the first heartbeat
//     would come only half a TTL later;
//   - a Listener or Cluster request on a per-type stream: the response is
//     the stream's one message, which every stream gets (xds/greet.go).
func SparesResend(req *discoveryv3.DiscoveryRequest, t *xdstype.Type, o Outcome, heldBack bool, set *snapshot.Set, on StreamTraits) bool {
	v := req.GetVersionInfo()
	switch {
	case v == "" || req.GetResponseNonce() != "" || req.GetErrorDetail() != nil:
		return false
	case o.As == nil || o.missing || heldBack || v != o.As.version:
		return false
	case t.FullState && o.As.missing > 0:
		// The response would tell the client that the names it asks for
		// and the set lacks do not exist; it may not know yet.
		return false
	case on.Warmed || on.PerType && warmed(t.URL):
		return false
	case on.PerType && t.FullState && !on.Quiet:
		// The stream's first message (xds/greet.go): a Listener or Cluster
		// response is whole or wrong, and the stream has no other type.
		return false
	case on.TTL:
		for _, n := range set.TTLNames() {
			if o.Next[n] != nil {
				return false
			}
		}
	}
	return true
}
