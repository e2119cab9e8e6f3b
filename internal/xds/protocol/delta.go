package protocol

import (
	"maps"
	"slices"
	"sort"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// DeltaWatch is one delta stream's state for one resource type: the
// subscription and, per resource, what the client holds. Like the
// state-of-the-world watch it is a plain value owned by the stream's loop.
type DeltaWatch struct {
	TypeState
	// pending records each response not yet ACKed or NACKed. Bounded: a
	// client that never answers cannot grow it.
	pending *pendingSent
	// VHDS is set for VirtualHost watches: VHDS on demand (vhds.go).
	VHDS *vhdsState
}

// deltaSent is what one delta response changed.
type deltaSent struct {
	at      time.Time
	version string // the type's version, for status
	// plan is what the response carried. When it was a shared transition
	// its ACK moves acked from the origin to step.to without copying.
	plan DeltaPlan
	// counted is set when the changes were counted as in flight (moving):
	// not for a response sent with nothing ACKed or in flight before it,
	// whose resources cannot have arrived before its own answer.
	counted bool
}

// change is one resource sent (r set) or removed (r nil).
type change struct {
	name string
	r    *snapshot.Resource
}

const maxOutstanding = 64

// NewDeltaWatch is a delta stream's state for type t, before a request.
func NewDeltaWatch(t *xdstype.Type, shared *Sharing) DeltaWatch {
	w := DeltaWatch{TypeState: TypeState{Type: t, shared: shared}}
	if t.URL == xdstype.VirtualHostURL {
		w.VHDS = &vhdsState{}
	}
	return w
}

// ownHeld and ownAcked make held and acked the watch's own before a write.
func (w *DeltaWatch) ownHeld()  { own(&w.Held, &w.HeldAs) }
func (w *DeltaWatch) ownAcked() { own(&w.Acked, &w.AckedAs) }

// own makes *m a map of the stream's own before a write: a copy of the
// shared canon's it was (as), or a new one. A ledger's maps start nil: ten
// thousand streams need not each keep empty ones, and most come to share a
// canon's.
func own(m *map[string]*snapshot.Resource, as **Canon) {
	switch {
	case *as != nil:
		*m, *as = maps.Clone(*m), nil
	case *m == nil:
		*m = map[string]*snapshot.Resource{}
	}
}

// Covers reports whether the client's subscription includes name: for
// VirtualHosts, the aliases answered (vhds.go).
func (w *DeltaWatch) Covers(name string) bool {
	if w.VHDS != nil {
		return w.vhdsCovers(name)
	}
	return w.TypeState.Covers(name)
}

// inBulk reports whether the client has name through its wildcard or a
// glob collection, whatever it names explicitly.
func (w *DeltaWatch) inBulk(name string) bool {
	return w.Wildcard || w.Sub.inCollection(name)
}

// Subscribe applies a request's subscription changes and reports whether a
// response is owed. Changes apply whatever the request's nonce (X27): the
// nonce only tells which response an ACK or NACK is about.
func (w *DeltaWatch) Subscribe(req *discoveryv3.DeltaDiscoveryRequest, set *snapshot.Set) (owe bool) {
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	first := !w.Started
	if !first && len(subscribe) == 0 && len(unsubscribe) == 0 {
		return false
	}
	w.VHDS.again(subscribe)
	w.Settled = ""
	if first {
		// The first request is always answered, even when the client
		// holds everything already: its initial fetch waits for a response.
		w.Started, owe = true, true
		if w.subscribeFirst(req, set) {
			return true
		}
	}
	// The names are shared: change a copy, then share the result.
	names := make(map[string]struct{}, len(w.Names)+len(subscribe))
	maps.Copy(names, w.Names)
	w.Names = names
	// drop is set when the client loses a wildcard or a glob collection:
	// it drops what it no longer subscribes to, once the new subscription
	// is known; dropped are the names it unsubscribed from.
	added, drop := w.addNames(req)
	lost, dropped := w.removeNames(unsubscribe)
	drop = drop || lost
	w.Sub = w.shared.subs.get(w.Wildcard, slices.Collect(maps.Keys(w.Names)))
	w.Names = w.Sub.names
	for _, n := range dropped {
		if w.Held[n] == nil || !w.Covers(n) {
			// The client drops it, unless it still has it through the
			// wildcard (X31) or a glob collection.
			w.forget(n)
		}
	}
	if drop {
		w.dropUncovered()
	}
	w.forceMembers(subscribe, set)
	if first {
		w.adopt(req.GetInitialResourceVersions(), set)
	}
	w.rejoinShared(set)
	return owe || added
}

// subscribeFirst starts the subscription of a stream's first request, and
// reports whether it handled the whole request: the common case, where the
// request's names are the subscription and what it says the client holds
// is adopted against it.
func (w *DeltaWatch) subscribeFirst(req *discoveryv3.DeltaDiscoveryRequest, set *snapshot.Set) bool {
	subscribe := req.GetResourceNamesSubscribe()
	if len(subscribe) == 0 && w.Type.Wildcard {
		// The legacy wildcard: an empty first request for a wildcard
		// type (X32).
		w.Wildcard, w.legacy = true, true
	}
	if len(req.GetResourceNamesUnsubscribe()) > 0 {
		return false
	}
	w.Wildcard = w.Wildcard || slices.Contains(subscribe, wildcardName)
	w.Sub = w.shared.subs.get(w.Wildcard, subscribe)
	w.Names = w.Sub.names
	w.adopt(req.GetInitialResourceVersions(), set)
	return true
}

// addNames adds the request's subscriptions to w.Names (a copy the caller
// owns) and reports whether they are owed a response, and whether the
// client loses what the legacy wildcard gave it.
func (w *DeltaWatch) addNames(req *discoveryv3.DeltaDiscoveryRequest) (owe, drop bool) {
	star, named := false, false
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == wildcardName {
			star = true
			continue
		}
		named = true
		w.Names[n] = struct{}{}
		_, told := req.GetInitialResourceVersions()[n]
		if _, has := w.Held[n]; has && !told {
			// Answered even if this stream believes the client has it
			// (X29), but not when the client itself just said which
			// version it holds (X35). A name not held is answered anyway.
			if w.force == nil {
				w.force = map[string]struct{}{}
			}
			w.force[n] = struct{}{}
		}
	}
	switch {
	case star:
		w.Wildcard, w.legacy = true, false
	case named && w.legacy:
		// Subscribing to a name ends the legacy wildcard; a client that
		// wants both subscribes to "*" explicitly.
		w.Wildcard, w.legacy = false, false
		drop = true
	}
	return star || named, drop
}

// removeNames takes the request's unsubscriptions out of w.Names (a copy
// the caller owns): dropped are the names the client unsubscribed from,
// and drop is set when it loses the wildcard or a glob collection.
func (w *DeltaWatch) removeNames(unsubscribe []string) (drop bool, dropped []string) {
	for _, n := range unsubscribe {
		if n == wildcardName {
			if w.Wildcard {
				w.Wildcard, w.legacy = false, false
				drop = true
			}
			continue
		}
		if _, ok := w.Names[n]; !ok {
			// Never subscribed: nothing to do (X30).
			continue
		}
		delete(w.Names, n)
		delete(w.force, n)
		dropped = append(dropped, n)
		drop = drop || w.Sub.isGlob(n)
	}
	return drop, dropped
}

// rejoinShared makes a client left holding exactly the shared set of its
// subscription share it again.
func (w *DeltaWatch) rejoinShared(set *snapshot.Set) {
	if w.HeldAs != nil || w.AckedAs != nil || len(w.Held) == 0 || w.VHDS != nil {
		return
	}
	if c := w.shared.canonOf(w.Held, set, w.Sub); c != nil && w.shared.canonOf(w.Acked, set, w.Sub) == c {
		w.Held, w.HeldAs, w.Acked, w.AckedAs = c.held, c, c.held, c
	}
}

// canonUnlessVHDS is the shared canon of the set within the subscription,
// nil for a VirtualHost watch, which never shares one (vhds.go).
func (w *DeltaWatch) canonUnlessVHDS(set *snapshot.Set) *Canon {
	if w.VHDS != nil {
		return nil
	}
	return w.shared.canon(set, w.Sub)
}

// adopt takes what a reconnecting client says it holds (X35), on the first
// request for the type. A client holding exactly the shared set joins it
// without a map of its own; otherwise a stand-in carries each version that
// is not the set's, and never equals a resource at another version.
func (w *DeltaWatch) adopt(initial map[string]string, set *snapshot.Set) {
	if len(initial) == 0 {
		return
	}
	w.Synced = true
	if c := w.canonUnlessVHDS(set); c != nil && len(c.held) == len(initial) {
		same := true
		for n, v := range initial {
			if r := c.held[n]; r == nil || r.Version != v {
				same = false
				break
			}
		}
		if same {
			w.Held, w.HeldAs, w.Acked, w.AckedAs = c.held, c, c.held, c
			return
		}
	}
	held := make(map[string]*snapshot.Resource, len(initial))
	for n, v := range initial {
		if !w.Covers(n) {
			continue // unsubscribed in the same request: dropped
		}
		if _, named := w.Names[n]; named && w.VHDS != nil {
			continue // an alias or a namespace, answered afresh: not a virtual host
		}
		r := set.Get(n)
		if r == nil || r.Version != v {
			r = &snapshot.Resource{Name: n, Version: v}
		}
		held[n] = r
	}
	w.Held, w.HeldAs, w.Acked, w.AckedAs = held, nil, maps.Clone(held), nil
}

func (w *DeltaWatch) forget(n string) {
	if _, ok := w.Held[n]; ok {
		w.ownHeld()
		delete(w.Held, n)
	}
	if _, ok := w.Acked[n]; ok {
		w.ownAcked()
		delete(w.Acked, n)
	}
	delete(w.Nacked, n)
}

// forceMembers answers a glob collection just subscribed to with all its
// members, those the client already holds included (X29 for a glob: the
// client's new watch waits for them).
func (w *DeltaWatch) forceMembers(subscribe []string, set *snapshot.Set) {
	for _, n := range subscribe {
		c, ok := w.Sub.Globs[n]
		if !ok {
			continue
		}
		c.each(set, func(m string) {
			if _, has := w.Held[m]; has {
				if w.force == nil {
					w.force = map[string]struct{}{}
				}
				w.force[m] = struct{}{}
			}
		})
	}
}

// dropUncovered forgets resources the client held only through a wildcard
// or a glob collection that has ended: it drops them itself.
func (w *DeltaWatch) dropUncovered() {
	for n := range w.Held {
		if !w.Covers(n) {
			w.forget(n)
		}
	}
}

// Plan returns what the client lacks and may have now: every subscribed
// resource whose version differs from what it holds (X25), unless it names
// a cluster the client does not have yet; and in removed the names it holds
// that are gone and no longer named by anything it holds (X34), and those
// it subscribed to that do not exist (X33, unless notFound is false).
func (w *DeltaWatch) Plan(p *Planner, set *snapshot.Set, notFound, ttl bool) DeltaPlan {
	if d, ok := w.planShared(p, set, notFound, ttl); ok {
		return d
	}
	var d DeltaPlan
	d.Resources, d.Removed, d.changes = w.planEach(p, set, notFound, ttl)
	return d
}

// DeltaPlan is what one delta response carries.
type DeltaPlan struct {
	Resources []*discoveryv3.Resource
	Removed   []string
	changes   []change
	// Step is set when the plan is the group's shared transition from the
	// canon the client holds, from.
	Step *Transition
	from *Canon
	// answers are, for VHDS, what the plan answers each alias with, as
	// resolved against answersAt (ContentAt).
	answers   map[string]vhdsAnswer
	answersAt string
}

// planShared is plan in O(changes) for a client holding exactly the
// previous set within its subscription: the group's shared transition
// lists what to send and remove. It declines (ok false) whenever
// make-before-break would hold or keep something, for names just
// subscribed, and when a name still subscribed is removed (the client is
// then told it does not exist, which the full plan records).
func (w *DeltaWatch) planShared(p *Planner, set *snapshot.Set, notFound, ttl bool) (d DeltaPlan, ok bool) {
	from := w.HeldAs
	t := p.sharedStep(&w.Ledger, w.Sub, len(w.force) > 0, set)
	if t == nil || from == nil && notFound && t.to.missing > 0 {
		// Holding nothing yet, a client subscribed to a missing name must
		// be told it does not exist: the full plan records that.
		return d, false
	}
	for _, n := range t.removed {
		if _, named := w.Names[n]; named || p.keep(w.Type, n, false) {
			return d, false
		}
	}
	return DeltaPlan{Step: t, from: from, Resources: t.delta(ttl), Removed: t.removed}, true
}

// Each calls fn for every change the plan carries: a resource sent, or a
// name removed (r nil).
func (d *DeltaPlan) Each(fn func(name string, r *snapshot.Resource)) {
	if t := d.Step; t != nil {
		for _, n := range t.changed {
			fn(n, t.to.held[n])
		}
		for _, n := range t.removed {
			fn(n, nil)
		}
		return
	}
	for _, c := range d.changes {
		fn(c.name, c.r)
	}
}

// Size is the number of changes.
func (d *DeltaPlan) Size() int {
	if d.Step != nil {
		return len(d.Step.changed) + len(d.Step.removed)
	}
	return len(d.changes)
}

// planEach is plan by looking at every name the client subscribes to or
// holds.
func (w *DeltaWatch) planEach(p *Planner, set *snapshot.Set, notFound, ttl bool) (resources []*discoveryv3.Resource, removed []string, changes []change) {
	consider := func(n string) {
		if !w.Covers(n) {
			return
		}
		r := set.Get(n)
		cur, has := w.Held[n]
		_, forced := w.force[n]
		_, named := w.Names[n]
		switch {
		case r != nil:
			// A name just subscribed is answered even if the client seems
			// to hold it (X29), but like any other it waits while what it
			// names has not reached the client.
			if (forced || !sameVersion(cur, r)) && !p.mustWait(r) {
				resources = append(resources, r.ForDelta(ttl))
				changes = append(changes, change{n, r})
			}
		case cur != nil:
			if !p.keep(w.Type, n, named) {
				removed = append(removed, n) // deleted since the client got it
				changes = append(changes, change{n, nil})
			}
		case named && notFound && (forced || !has) && !w.Sub.isGlob(n):
			// A glob is not a resource: it is never "not found".
			removed = append(removed, n) // does not exist
			changes = append(changes, change{n, nil})
		}
	}
	// Each name once: the set's names under a wildcard (or the members of
	// the glob collections), then explicit names not already seen, then
	// held names not already seen.
	if w.Wildcard {
		for _, n := range set.Names() {
			consider(n)
		}
	} else {
		w.Sub.eachMember(set, consider)
	}
	for n := range w.Names {
		if !w.inBulk(n) || set.Get(n) == nil {
			consider(n)
		}
	}
	for n := range w.Held {
		if _, named := w.Names[n]; !named && (!w.inBulk(n) || set.Get(n) == nil) {
			consider(n)
		}
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	sort.Strings(removed)
	return resources, removed, changes
}

// Heartbeats lists the TTL refreshes for the resources with a TTL that the
// client holds at their current version (X41).
func (w *DeltaWatch) Heartbeats(set *snapshot.Set) []*discoveryv3.Resource {
	var out []*discoveryv3.Resource
	for _, n := range set.TTLNames() {
		// Only at the version the client ACKed: after a NACK it runs
		// what it had, and a heartbeat at another version reads to Envoy
		// as an update without its resource.
		if r := set.Get(n); sameVersion(w.Held[n], r) && sameVersion(w.Acked[n], r) {
			out = append(out, r.Heartbeat())
		}
	}
	return out
}

// SentResponse records what a response gave the client.
//
// version is what the response brings the client to, for status: the set's
// version, or for a heartbeat, which changes nothing, the version the
// client already had.
func (w *DeltaWatch) SentResponse(nonce, version string, set *snapshot.Set, d DeltaPlan, now time.Time) {
	counted := w.pending.len() > 0 || len(w.Acked) > 0
	if counted {
		d.Each(func(n string, _ *snapshot.Resource) { w.bump(n) })
	}
	switch {
	case d.Step != nil && w.HeldAs == d.from && (d.from != nil || len(w.Held) == 0):
		w.Held, w.HeldAs = d.Step.to.held, d.Step.to
	case d.Size() > 0:
		w.ownHeld()
		d.Each(func(n string, r *snapshot.Resource) {
			if _, named := w.Names[n]; r == nil && !named {
				delete(w.Held, n)
				return
			}
			w.Held[n] = r // nil: still subscribed, told it does not exist
		})
		if w.VHDS == nil {
			if c := w.shared.canonOf(w.Held, set, w.Sub); c != nil {
				w.Held, w.HeldAs = c.held, c
			}
		}
	}
	if w.VHDS != nil {
		w.VHDS.recordAnswers(d.answers)
	}
	w.force = nil
	if w.pending.len() >= maxOutstanding {
		oldest := w.pending.oldest()
		s, _ := w.pending.get(oldest)
		w.settle(s)
		w.pending.del(oldest)
	}
	if w.pending == nil {
		w.pending = &pendingSent{}
	}
	w.pending.put(nonce, deltaSent{at: now, version: version, plan: d, counted: counted})
}

// settle takes a response's changes off the in-flight counts.
func (w *DeltaWatch) settle(rec deltaSent) {
	if !rec.counted {
		return
	}
	rec.plan.Each(func(n string, _ *snapshot.Resource) { w.Moving.sub(n) })
}

// Answered applies the client's ACK or NACK of the response with nonce and
// returns the version it carried; ok is false when the nonce is unknown
// (never sent, already answered, or too old): then nothing is applied. An ACKed
// response's changes are what the client now has; a NACKed one's resources
// are what it rejected. Either way the sent versions stay recorded as held,
// so rejected versions are not sent again until they change (X12).
func (w *DeltaWatch) Answered(nonce string, nack bool) (version string, ok bool) {
	rec, ok := w.pending.get(nonce)
	if !ok {
		return "", false
	}
	if w.pending.del(nonce) {
		w.pending = nil
	}
	w.settle(rec)
	w.Synced = true
	if !nack {
		w.AckedVersion = rec.version
	}
	if d := rec.plan; !nack && d.Step != nil && w.AckedAs == d.from && (d.from != nil || len(w.Acked) == 0) && w.Sub == d.Step.to.sub {
		// The client had exactly from and now has exactly step.to.
		w.Acked, w.AckedAs = d.Step.to.held, d.Step.to
		if len(w.Nacked) > 0 {
			d.Each(func(n string, r *snapshot.Resource) {
				if r != nil {
					delete(w.Nacked, n)
				}
			})
		}
	} else {
		rec.plan.Each(func(n string, r *snapshot.Resource) {
			if !w.Covers(n) {
				// Unsubscribed since: the client dropped it.
				return
			}
			switch {
			case nack:
				if r != nil {
					w.reject(n, r)
				}
			case r == nil:
				if _, ok := w.Acked[n]; ok {
					w.ownAcked()
					delete(w.Acked, n)
				}
			default:
				w.ownAcked()
				w.Acked[n] = r
				delete(w.Nacked, n)
			}
		})
		if c := w.HeldAs; !nack && c != nil && w.pending.len() == 0 && w.AckedAs != c && w.shared.canonOf(w.Acked, c.set, w.Sub) == c {
			// Everything sent is ACKed and is the shared set: share it.
			w.Acked, w.AckedAs = c.held, c
		}
	}
	return rec.version, true
}
