package xds

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

// watch is one stream's state-of-the-world state for one resource type: what
// the client subscribed to, what it holds, and whether a response is owed.
// It is a plain value owned by the stream's loop; nothing here touches gRPC.
// What the client holds is usually a group's shared state (shared.go), so
// its own size is small.
type watch struct {
	typeState

	// warm is set on ADS when a response of the type this one warms (CDS for
	// EDS, LDS for RDS) was sent: Envoy finishes warming only on a fresh
	// response, so the next request is answered even if nothing changed.
	warm bool

	nonce string // latest nonce sent for the type; "" before the first response
	// setVersion is the version of the type's whole set that the latest
	// response was planned from, ackedSet that of the latest one ACKed:
	// the version a publish introduced, which push latency is measured
	// against (a subscription to part of the set has a version of its
	// own, see heldVersion).
	setVersion, ackedSet string
}

func newWatch(t *xdstype.Type, shared *sharing) watch {
	return watch{typeState: typeState{typ: t, shared: shared}}
}

// requestKind says what a request meant for its type.
type requestKind int

const (
	reqStale   requestKind = iota // response_nonce is not the latest: ignored
	reqInitial                    // the first request for the type
	reqUpdate                     // a later request before any response of the type
	reqACK
	reqNACK
)

// onRequest applies a state-of-the-world request to the watch and reports
// what it was and whether a response is now owed.
func (w *watch) onRequest(req *discoveryv3.DiscoveryRequest, snap *snapshot.Snapshot) (requestKind, bool) {
	var kind requestKind
	switch {
	case w.sent && req.GetResponseNonce() != w.nonce:
		// A response the client has not seen yet supersedes this request; the
		// client will send a request carrying its nonce (X14).
		return reqStale, false
	case !w.started:
		kind = reqInitial
	case !w.sent:
		kind = reqUpdate
	case req.GetErrorDetail() != nil:
		// A NACK is told by error_detail alone, never by comparing versions
		// (X10): its version_info is what the client still runs (X11). The
		// client rejected the whole response and keeps what it had ACKed.
		kind = reqNACK
		for n, r := range w.held {
			if !sameVersion(w.acked[n], r) {
				w.reject(n, r)
			}
		}
		w.moving = inFlight{}
		w.synced = true
	default:
		kind = reqACK
		w.ackedVersion, w.ackedSet = w.version, w.setVersion
		w.acked, w.ackedAs = w.held, w.heldAs
		w.nacked = nil
		// The latest response answers for every earlier one.
		w.moving = inFlight{}
		w.synced = true
	}

	first := !w.started
	w.started = true
	added, changed := w.subscribe(req.GetResourceNames(), first)

	set := snap.Set(w.typ.URL)
	owe := false
	switch {
	case first:
		// The full-state types always answer the first request, even with no
		// resources: that is how a client learns its names do not exist.
		owe = w.typ.FullState || w.hasAny(set)
	case changed && w.typ.FullState:
		owe = true
	case len(added) > 0:
		// A newly subscribed name is sent even if the client had it before at
		// the same version (X17): the client dropped it on unsubscribe.
		owe = anyExists(set, added)
	}
	if w.warm && kind != reqNACK {
		owe = true
	}
	if !w.typ.FullState && !w.hasAny(set) {
		// An empty response for a per-resource type means nothing (X22), and
		// Envoy reads it as an assignment gone missing; say nothing instead.
		owe = false
	}
	return kind, owe
}

// subscribe applies resource_names and returns the names newly added ("*"
// when the wildcard is) and whether the subscription changed.
func (w *watch) subscribe(names []string, first bool) (added []string, changed bool) {
	if !first && w.same(names) {
		// The common case, an ACK repeating the subscription: nothing to
		// rebuild (an EDS ACK may carry thousands of names).
		return nil, false
	}
	star := slices.Contains(names, wildcardName)
	wildcard, legacy := star, false
	if len(names) == 0 && w.typ.Wildcard && (first || w.legacy) {
		// The legacy wildcard: an empty first request, kept while later
		// requests stay empty (X19). After an explicit subscription an empty
		// list means no resources (X18).
		wildcard, legacy = true, true
	}
	sub := w.shared.subs.get(wildcard, names)
	if len(w.names) == 0 {
		added = make([]string, 0, len(sub.names)+1)
	}
	for n := range sub.names {
		if _, ok := w.names[n]; !ok {
			added = append(added, n)
			if _, has := w.held[n]; !has {
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
	changed = sub != w.sub
	if wildcard && !w.wildcard {
		added = append(added, wildcardName)
	}
	w.wildcard, w.legacy = wildcard, legacy
	w.sub, w.names = sub, sub.names
	if changed {
		w.settled = ""
		// The client drops what it no longer subscribes to, so it no longer
		// holds or has ACKed it. The maps may be shared: filter into new
		// ones.
		w.held, w.acked = w.within(w.held), w.within(w.acked)
		w.heldAs, w.ackedAs = nil, nil
	}
	return added, changed
}

// within returns the part of m the subscription covers.
func (w *watch) within(m map[string]*snapshot.Resource) map[string]*snapshot.Resource {
	out := make(map[string]*snapshot.Resource, len(m))
	for n, r := range m {
		if w.covers(n) {
			out[n] = r
		}
	}
	return out
}

// same reports whether names is exactly the current subscription.
func (w *watch) same(names []string) bool {
	star := false
	count := 0
	for _, n := range names {
		if n == wildcardName {
			star = true
			continue
		}
		if _, ok := w.names[n]; !ok {
			return false
		}
		count++
	}
	legacy := len(names) == 0 && w.typ.Wildcard && w.legacy
	return count == len(w.names) && (star || legacy) == w.wildcard && (star || legacy || !w.wildcard) && legacy == w.legacy
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
func (w *watch) hasAny(set *snapshot.Set) bool {
	if w.wildcard {
		return set.Len() > 0
	}
	for n := range w.names {
		if set.Get(n) != nil {
			return true
		}
	}
	found := false
	w.sub.eachMember(set, func(string) { found = true })
	return found
}

// outcome is a plan: what the client should hold of the type after the next
// response.
type outcome struct {
	next map[string]*snapshot.Resource
	// as is set when next is as.held: exactly the set within the
	// subscription, shared with every stream in that state.
	as *canon
	// step is set when next was reached from the held canon by the group's
	// shared transition: what changed is listed there.
	step *transition
	// missing is set when a name the client subscribes to is in the set
	// but not in next (held back): next is then not the set's version of
	// the subscription, whatever it holds.
	missing bool
}

// plan returns what the client should hold of the type after the next
// response, and whether that differs from what it holds in a way worth a
// response. It follows the snapshot except where make-before-break says
// otherwise: a resource naming a cluster the client does not have yet keeps
// its previous version (or stays away), and a full-state resource that is
// gone stays while something the client holds still names it.
func (w *watch) plan(p *planner, set *snapshot.Set) (outcome, bool) {
	if o, changed, ok := w.planShared(p, set); ok {
		return o, changed
	}
	next := make(map[string]*snapshot.Resource, max(len(w.held), len(w.names)))
	missing := false
	consider := func(n string) {
		if _, done := next[n]; done || !w.covers(n) {
			return
		}
		r, cur := set.Get(n), w.held[n]
		_, forced := w.force[n]
		switch {
		case r == nil:
			_, named := w.names[n]
			if cur != nil && w.typ.FullState && p.keep(w.typ, n, named) {
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
	if w.wildcard {
		for _, n := range set.Names() {
			consider(n)
		}
	} else {
		w.sub.eachMember(set, consider)
	}
	for n := range w.names {
		consider(n)
	}
	for n := range w.held {
		consider(n)
	}
	o := outcome{next: next, missing: missing}
	if c := w.shared.canonOf(next, set, w.sub); c != nil {
		// The client gets exactly the set: share the group's copy, and let
		// the next push take the shared transition.
		o = outcome{next: c.held, as: c}
	}
	if !w.typ.FullState && len(next) == 0 {
		// Nothing to say: an empty response for a per-resource type changes
		// nothing (X22).
		return o, false
	}
	if !w.sent {
		return o, true
	}
	for n, r := range next {
		if !sameVersion(w.held[n], r) {
			return o, true
		}
	}
	// For the full-state types a resource gone from the set is a change
	// (absence deletes, X22); for the others a client keeps what is not
	// resent, so a deletion alone is not worth a response.
	return o, w.typ.FullState && len(next) != len(w.held)
}

// planShared is plan for the common case, in O(changes): the client holds
// exactly the previous set within its subscription, so the group's shared
// transition to the new set says what changes. It declines (ok false)
// whenever make-before-break would hold something back or keep something,
// and for names just subscribed: the full plan handles those.
func (w *watch) planShared(p *planner, set *snapshot.Set) (o outcome, changed, ok bool) {
	t := p.sharedStep(&w.ledger, w.sub, len(w.force) > 0, set)
	if t == nil {
		return outcome{}, false, false
	}
	if w.typ.FullState {
		for _, n := range t.removed {
			if _, named := w.names[n]; p.keep(w.typ, n, named) {
				return outcome{}, false, false
			}
		}
	}
	o = outcome{next: t.to.held, as: t.to, step: t}
	switch {
	case !w.typ.FullState && len(t.to.held) == 0:
		return o, false, true
	case !w.sent:
		return o, true, true
	}
	return o, len(t.changed) > 0 || w.typ.FullState && len(t.removed) > 0, true
}

// response builds the response giving the client o.next, each resource
// encoded once in the snapshot and shared here (X8: names are unique, from
// a map). Its version identifies what the client holds after it
// (heldVersion).
//
// For Listener and Cluster the response holds every resource the client
// should have. For the other types it holds only what is new or changed
// (and names just subscribed to): the client keeps the rest (X22), so one
// changed assignment among a thousand costs one assignment on the wire. A
// response that warms a cluster or listener (X38) holds them all.
func (w *watch) response(o outcome, nonce string, ttl bool) *discoveryv3.DiscoveryResponse {
	next := o.next
	var names []string
	if o.as != nil {
		names = o.as.names
	} else {
		names = make([]string, 0, len(next))
		for n := range next {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	whole := w.typ.FullState || w.warm || !w.sent
	var resources []*anypb.Any
	switch {
	case o.step != nil && !whole:
		// Only what changed, from the shared transition (nothing is
		// forced on this path).
		resources = o.step.sotw(ttl)
	case o.as != nil && whole:
		resources = o.as.sotw(ttl)
	default:
		resources = make([]*anypb.Any, 0, len(names))
		for _, n := range names {
			_, forced := w.force[n]
			if whole || forced || !sameVersion(w.held[n], next[n]) {
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
			if !sameVersion(w.held[n], r) {
				w.bumpAcked(n)
			}
		}
		for n := range w.held {
			if next[n] == nil {
				w.bumpAcked(n)
			}
		}
	}
	w.held, w.heldAs = next, o.as
	w.force = nil
	w.nonce, w.version, w.sent = nonce, version, true
	w.warm = false
	return &discoveryv3.DiscoveryResponse{
		VersionInfo: version,
		Resources:   resources,
		TypeUrl:     w.typ.URL,
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
func heldVersion(o outcome, names []string) string {
	if o.as != nil {
		return o.as.version
	}
	return "partial-" + contentVersion(names, o.next)
}

// adopt records o, a canon, as the client's latest response and ACKed:
// what a reconnecting client spared the resend already has (X24). The
// nonce stays "": nothing was sent on this stream, so the client's next
// request of the type carries none and reads as an ACK of this, not as a
// stale request. The client's holdings count as settled, so that make-
// before-break holds back for it what it would for a client that ACKed.
func (w *watch) adopt(o outcome, set *snapshot.Set) {
	w.held, w.heldAs = o.next, o.as
	w.acked, w.ackedAs = o.next, o.as
	w.version, w.ackedVersion = o.as.version, o.as.version
	w.setVersion, w.ackedSet = set.Version(), set.Version()
	w.nonce, w.sent = "", true
	w.synced = true
	w.force, w.warm = nil, false
	w.moving, w.nacked = inFlight{}, nil
}

func (w *watch) bumpAcked(n string) {
	if w.acked[n] != nil {
		w.bump(n)
	}
}

// heartbeat builds a response refreshing the TTL of every resource with one
// that the client holds at its current version, or returns nil if there is
// none (X41). Heartbeats are not updates: what the client holds is unchanged.
//
// Only what the client ACKed is held: after a NACK it still runs what it
// had, and a heartbeat naming the version it rejected is, to Envoy, an
// update without its resource rather than a refresh. Until it ACKs the
// type's latest response nothing is refreshed (the response carries the
// TTLs itself); an ACK of a heartbeat sent meanwhile would otherwise read
// as an ACK of everything sent.
func (w *watch) heartbeat(set *snapshot.Set, nonce string) *discoveryv3.DiscoveryResponse {
	if !w.sent || w.ackedVersion != w.version {
		return nil
	}
	var resources []*anypb.Any
	for _, n := range set.TTLNames() {
		if r := set.Get(n); sameVersion(w.held[n], r) && sameVersion(w.acked[n], r) {
			resources = append(resources, r.HeartbeatSotW())
		}
	}
	if len(resources) == 0 {
		return nil
	}
	w.nonce = nonce
	return &discoveryv3.DiscoveryResponse{VersionInfo: w.version, Resources: resources, TypeUrl: w.typ.URL, Nonce: nonce}
}

// warms is the type whose resources Envoy waits for after a response of
// typeURL (X38): a cluster warms until it gets a fresh assignment, a
// listener until it gets a fresh route configuration. "" for none.
func warms(typeURL string) string {
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
	return typeURL == warms(xdstype.ClusterURL) || typeURL == warms(xdstype.ListenerURL)
}

// streamTraits is what the stream tells sparesResend about itself and the
// type's history on it.
type streamTraits struct {
	perType bool // a per-type stream, not ADS
	quiet   bool // one REST poll (ServeStream): it owes no first message
	ttl     bool // the client reads resource TTLs in state of the world
	// warmed is set when a response on this stream warmed the type
	// (X38), before or since the client first asked for it.
	warmed bool
}

// sparesResend reports whether the response o planned for a type t's first request
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
//     the stream's one message, which every stream gets (greet.go).
func sparesResend(req *discoveryv3.DiscoveryRequest, t *xdstype.Type, o outcome, heldBack bool, set *snapshot.Set, on streamTraits) bool {
	v := req.GetVersionInfo()
	switch {
	case v == "" || req.GetResponseNonce() != "" || req.GetErrorDetail() != nil:
		return false
	case o.as == nil || o.missing || heldBack || v != o.as.version:
		return false
	case t.FullState && o.as.missing > 0:
		// The response would tell the client that the names it asks for
		// and the set lacks do not exist; it may not know yet.
		return false
	case on.warmed || on.perType && warmed(t.URL):
		return false
	case on.perType && t.FullState && !on.quiet:
		// The stream's first message (greet.go): a Listener or Cluster
		// response is whole or wrong, and the stream has no other type.
		return false
	case on.ttl:
		for _, n := range set.TTLNames() {
			if o.next[n] != nil {
				return false
			}
		}
	}
	return true
}
