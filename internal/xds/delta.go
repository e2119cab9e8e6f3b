package xds

import (
	"maps"
	"slices"
	"sort"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// deltaWatch is one delta stream's state for one resource type: the
// subscription and, per resource, what the client holds. Like the
// state-of-the-world watch it is a plain value owned by the stream's loop.
type deltaWatch struct {
	typeState
	// pending records each response not yet ACKed or NACKed. Bounded: a
	// client that never answers cannot grow it.
	pending *pendingSent
	// vhds is set for VirtualHost watches: VHDS on demand (vhds.go).
	vhds *vhdsState
}

// deltaSent is what one delta response changed.
type deltaSent struct {
	at      time.Time
	version string // the type's version, for status
	// plan is what the response carried. When it was a shared transition
	// its ACK moves acked from the origin to step.to without copying.
	plan deltaPlan
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

func newDeltaWatch(t *xdstype.Type, shared *sharing) deltaWatch {
	w := deltaWatch{typeState: typeState{typ: t, shared: shared}}
	if t.URL == xdstype.VirtualHostURL {
		w.vhds = &vhdsState{}
	}
	return w
}

// ownHeld and ownAcked make held and acked the watch's own before a write.
func (w *deltaWatch) ownHeld()  { own(&w.held, &w.heldAs) }
func (w *deltaWatch) ownAcked() { own(&w.acked, &w.ackedAs) }

// own makes *m a map of the stream's own before a write: a copy of the
// shared canon's it was (as), or a new one. A ledger's maps start nil: ten
// thousand streams need not each keep empty ones, and most come to share a
// canon's.
func own(m *map[string]*snapshot.Resource, as **canon) {
	switch {
	case *as != nil:
		*m, *as = maps.Clone(*m), nil
	case *m == nil:
		*m = map[string]*snapshot.Resource{}
	}
}

func (w *deltaWatch) covers(name string) bool {
	if w.vhds != nil {
		return w.vhdsCovers(name)
	}
	return w.typeState.covers(name)
}

// inBulk reports whether the client has name through its wildcard or a
// glob collection, whatever it names explicitly.
func (w *deltaWatch) inBulk(name string) bool {
	return w.wildcard || w.sub.inCollection(name)
}

// subscribe applies a request's subscription changes and reports whether a
// response is owed. Changes apply whatever the request's nonce (X27): the
// nonce only tells which response an ACK or NACK is about.
func (w *deltaWatch) subscribe(req *discoveryv3.DeltaDiscoveryRequest, set *snapshot.Set) (owe bool) {
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	first := !w.started
	if !first && len(subscribe) == 0 && len(unsubscribe) == 0 {
		return false
	}
	w.vhds.again(subscribe)
	w.settled = ""
	if first {
		// The first request is always answered, even when the client
		// holds everything already: its initial fetch waits for a response.
		w.started, owe = true, true
		if len(subscribe) == 0 && w.typ.Wildcard {
			// The legacy wildcard: an empty first request for a wildcard
			// type (X32).
			w.wildcard, w.legacy = true, true
		}
		if len(unsubscribe) == 0 {
			// The common case: the request's names are the subscription,
			// and what it says the client holds is adopted against it.
			w.wildcard = w.wildcard || slices.Contains(subscribe, wildcardName)
			w.sub = w.shared.subs.get(w.wildcard, subscribe)
			w.names = w.sub.names
			w.adopt(req.GetInitialResourceVersions(), set)
			return true
		}
	}
	// The names are shared: change a copy, then share the result.
	names := make(map[string]struct{}, len(w.names)+len(subscribe))
	maps.Copy(names, w.names)
	w.names = names
	star, named := false, false
	// drop is set when the client loses a wildcard or a glob collection:
	// it drops what it no longer subscribes to, once the new subscription
	// is known; dropped are the names it unsubscribed from.
	drop, dropped := false, []string(nil)
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == wildcardName {
			star = true
			continue
		}
		named = true
		w.names[n] = struct{}{}
		_, told := req.GetInitialResourceVersions()[n]
		if _, has := w.held[n]; has && !told {
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
		w.wildcard, w.legacy = true, false
		owe = true
	case named && w.legacy:
		// Subscribing to a name ends the legacy wildcard; a client that
		// wants both subscribes to "*" explicitly.
		w.wildcard, w.legacy = false, false
		drop = true
	}
	if named {
		owe = true
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == wildcardName {
			if w.wildcard {
				w.wildcard, w.legacy = false, false
				drop = true
			}
			continue
		}
		if _, ok := w.names[n]; !ok {
			// Never subscribed: nothing to do (X30).
			continue
		}
		delete(w.names, n)
		delete(w.force, n)
		dropped = append(dropped, n)
		drop = drop || w.sub.isGlob(n)
	}
	w.sub = w.shared.subs.get(w.wildcard, slices.Collect(maps.Keys(w.names)))
	w.names = w.sub.names
	for _, n := range dropped {
		if w.held[n] == nil || !w.covers(n) {
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
	if w.heldAs == nil && w.ackedAs == nil && len(w.held) > 0 && w.vhds == nil {
		// A client left holding exactly the shared set joins it.
		if c := w.shared.canonOf(w.held, set, w.sub); c != nil && w.shared.canonOf(w.acked, set, w.sub) == c {
			w.held, w.heldAs, w.acked, w.ackedAs = c.held, c, c.held, c
		}
	}
	return owe
}

// canonUnlessVHDS is the shared canon of the set within the subscription,
// nil for a VirtualHost watch, which never shares one (vhds.go).
func (w *deltaWatch) canonUnlessVHDS(set *snapshot.Set) *canon {
	if w.vhds != nil {
		return nil
	}
	return w.shared.canon(set, w.sub)
}

// adopt takes what a reconnecting client says it holds (X35), on the first
// request for the type. A client holding exactly the shared set joins it
// without a map of its own; otherwise a stand-in carries each version that
// is not the set's, and never equals a resource at another version.
func (w *deltaWatch) adopt(initial map[string]string, set *snapshot.Set) {
	if len(initial) == 0 {
		return
	}
	w.synced = true
	if c := w.canonUnlessVHDS(set); c != nil && len(c.held) == len(initial) {
		same := true
		for n, v := range initial {
			if r := c.held[n]; r == nil || r.Version != v {
				same = false
				break
			}
		}
		if same {
			w.held, w.heldAs, w.acked, w.ackedAs = c.held, c, c.held, c
			return
		}
	}
	held := make(map[string]*snapshot.Resource, len(initial))
	for n, v := range initial {
		if !w.covers(n) {
			continue // unsubscribed in the same request: dropped
		}
		if _, named := w.names[n]; named && w.vhds != nil {
			continue // an alias or a namespace, answered afresh: not a virtual host
		}
		r := set.Get(n)
		if r == nil || r.Version != v {
			r = &snapshot.Resource{Name: n, Version: v}
		}
		held[n] = r
	}
	w.held, w.heldAs, w.acked, w.ackedAs = held, nil, maps.Clone(held), nil
}

func (w *deltaWatch) forget(n string) {
	if _, ok := w.held[n]; ok {
		w.ownHeld()
		delete(w.held, n)
	}
	if _, ok := w.acked[n]; ok {
		w.ownAcked()
		delete(w.acked, n)
	}
	delete(w.nacked, n)
}

// forceMembers answers a glob collection just subscribed to with all its
// members, those the client already holds included (X29 for a glob: the
// client's new watch waits for them).
func (w *deltaWatch) forceMembers(subscribe []string, set *snapshot.Set) {
	for _, n := range subscribe {
		c, ok := w.sub.globs[n]
		if !ok {
			continue
		}
		c.each(set, func(m string) {
			if _, has := w.held[m]; has {
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
func (w *deltaWatch) dropUncovered() {
	for n := range w.held {
		if !w.covers(n) {
			w.forget(n)
		}
	}
}

// plan returns what the client lacks and may have now: every subscribed
// resource whose version differs from what it holds (X25), unless it names
// a cluster the client does not have yet; and in removed the names it holds
// that are gone and no longer named by anything it holds (X34), and those
// it subscribed to that do not exist (X33, unless notFound is false).
func (w *deltaWatch) plan(p *planner, set *snapshot.Set, notFound, ttl bool) deltaPlan {
	if d, ok := w.planShared(p, set, notFound, ttl); ok {
		return d
	}
	var d deltaPlan
	d.resources, d.removed, d.changes = w.planEach(p, set, notFound, ttl)
	return d
}

// deltaPlan is what one delta response carries.
type deltaPlan struct {
	resources []*discoveryv3.Resource
	removed   []string
	changes   []change
	// step is set when the plan is the group's shared transition from the
	// canon the client holds, from.
	step *transition
	from *canon
	// answers are, for VHDS, what the plan answers each alias with, as
	// resolved against answersAt (contentAt).
	answers   map[string]vhdsAnswer
	answersAt string
}

// planShared is plan in O(changes) for a client holding exactly the
// previous set within its subscription: the group's shared transition
// lists what to send and remove. It declines (ok false) whenever
// make-before-break would hold or keep something, for names just
// subscribed, and when a name still subscribed is removed (the client is
// then told it does not exist, which the full plan records).
func (w *deltaWatch) planShared(p *planner, set *snapshot.Set, notFound, ttl bool) (d deltaPlan, ok bool) {
	from := w.heldAs
	t := p.sharedStep(&w.ledger, w.sub, len(w.force) > 0, set)
	if t == nil || from == nil && notFound && t.to.missing > 0 {
		// Holding nothing yet, a client subscribed to a missing name must
		// be told it does not exist: the full plan records that.
		return d, false
	}
	for _, n := range t.removed {
		if _, named := w.names[n]; named || p.keep(w.typ, n, false) {
			return d, false
		}
	}
	return deltaPlan{step: t, from: from, resources: t.delta(ttl), removed: t.removed}, true
}

// each calls fn for every change the plan carries: a resource sent, or a
// name removed (r nil).
func (d *deltaPlan) each(fn func(name string, r *snapshot.Resource)) {
	if t := d.step; t != nil {
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

// size is the number of changes.
func (d *deltaPlan) size() int {
	if d.step != nil {
		return len(d.step.changed) + len(d.step.removed)
	}
	return len(d.changes)
}

// planEach is plan by looking at every name the client subscribes to or
// holds.
func (w *deltaWatch) planEach(p *planner, set *snapshot.Set, notFound, ttl bool) (resources []*discoveryv3.Resource, removed []string, changes []change) {
	consider := func(n string) {
		if !w.covers(n) {
			return
		}
		r := set.Get(n)
		cur, has := w.held[n]
		_, forced := w.force[n]
		_, named := w.names[n]
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
			if !p.keep(w.typ, n, named) {
				removed = append(removed, n) // deleted since the client got it
				changes = append(changes, change{n, nil})
			}
		case named && notFound && (forced || !has) && !w.sub.isGlob(n):
			// A glob is not a resource: it is never "not found".
			removed = append(removed, n) // does not exist
			changes = append(changes, change{n, nil})
		}
	}
	// Each name once: the set's names under a wildcard (or the members of
	// the glob collections), then explicit names not already seen, then
	// held names not already seen.
	if w.wildcard {
		for _, n := range set.Names() {
			consider(n)
		}
	} else {
		w.sub.eachMember(set, consider)
	}
	for n := range w.names {
		if !w.inBulk(n) || set.Get(n) == nil {
			consider(n)
		}
	}
	for n := range w.held {
		if _, named := w.names[n]; !named && (!w.inBulk(n) || set.Get(n) == nil) {
			consider(n)
		}
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	sort.Strings(removed)
	return resources, removed, changes
}

// heartbeats lists the TTL refreshes for the resources with a TTL that the
// client holds at their current version (X41).
func (w *deltaWatch) heartbeats(set *snapshot.Set) []*discoveryv3.Resource {
	var out []*discoveryv3.Resource
	for _, n := range set.TTLNames() {
		// Only at the version the client ACKed: after a NACK it runs
		// what it had, and a heartbeat at another version reads to Envoy
		// as an update without its resource.
		if r := set.Get(n); sameVersion(w.held[n], r) && sameVersion(w.acked[n], r) {
			out = append(out, r.Heartbeat())
		}
	}
	return out
}

// sentResponse records what a response gave the client.
//
// version is what the response brings the client to, for status: the set's
// version, or for a heartbeat, which changes nothing, the version the
// client already had.
func (w *deltaWatch) sentResponse(nonce, version string, set *snapshot.Set, d deltaPlan, now time.Time) {
	counted := w.pending.len() > 0 || len(w.acked) > 0
	if counted {
		d.each(func(n string, _ *snapshot.Resource) { w.bump(n) })
	}
	switch {
	case d.step != nil && w.heldAs == d.from && (d.from != nil || len(w.held) == 0):
		w.held, w.heldAs = d.step.to.held, d.step.to
	case d.size() > 0:
		w.ownHeld()
		d.each(func(n string, r *snapshot.Resource) {
			if _, named := w.names[n]; r == nil && !named {
				delete(w.held, n)
				return
			}
			w.held[n] = r // nil: still subscribed, told it does not exist
		})
		if w.vhds == nil {
			if c := w.shared.canonOf(w.held, set, w.sub); c != nil {
				w.held, w.heldAs = c.held, c
			}
		}
	}
	if w.vhds != nil {
		w.vhds.recordAnswers(d.answers)
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
func (w *deltaWatch) settle(rec deltaSent) {
	if !rec.counted {
		return
	}
	rec.plan.each(func(n string, _ *snapshot.Resource) { w.moving.sub(n) })
}

// answered applies the client's ACK or NACK of the response with nonce and
// returns the version it carried; ok is false when the nonce is unknown
// (never sent, already answered, or too old): then nothing is applied. An ACKed
// response's changes are what the client now has; a NACKed one's resources
// are what it rejected. Either way the sent versions stay recorded as held,
// so rejected versions are not sent again until they change (X12).
func (w *deltaWatch) answered(nonce string, nack bool) (version string, ok bool) {
	rec, ok := w.pending.get(nonce)
	if !ok {
		return "", false
	}
	if w.pending.del(nonce) {
		w.pending = nil
	}
	w.settle(rec)
	w.synced = true
	if !nack {
		w.ackedVersion = rec.version
	}
	if d := rec.plan; !nack && d.step != nil && w.ackedAs == d.from && (d.from != nil || len(w.acked) == 0) && w.sub == d.step.to.sub {
		// The client had exactly from and now has exactly step.to.
		w.acked, w.ackedAs = d.step.to.held, d.step.to
		if len(w.nacked) > 0 {
			d.each(func(n string, r *snapshot.Resource) {
				if r != nil {
					delete(w.nacked, n)
				}
			})
		}
	} else {
		rec.plan.each(func(n string, r *snapshot.Resource) {
			if !w.covers(n) {
				// Unsubscribed since: the client dropped it.
				return
			}
			switch {
			case nack:
				if r != nil {
					w.reject(n, r)
				}
			case r == nil:
				if _, ok := w.acked[n]; ok {
					w.ownAcked()
					delete(w.acked, n)
				}
			default:
				w.ownAcked()
				w.acked[n] = r
				delete(w.nacked, n)
			}
		})
		if c := w.heldAs; !nack && c != nil && w.pending.len() == 0 && w.ackedAs != c && w.shared.canonOf(w.acked, c.set, w.sub) == c {
			// Everything sent is ACKed and is the shared set: share it.
			w.acked, w.ackedAs = c.held, c
		}
	}
	return rec.version, true
}
