package status

import (
	"slices"
	"sort"
	"time"
)

// How far the newest change has got: per group, which open streams hold
// what it introduced. Propagation only watches a change arrive; the
// rollout package's staged rollouts decide who is given it.

// changeState is the newest change: when it was accepted and the type
// versions it introduced, bounded by the types times the groups of one
// fleet.
type changeState struct {
	at   time.Time
	keys map[acceptKey]bool
}

// maxPending bounds the streams a propagation lists as not done yet; the rest
// are counted.
const maxPending = 100

// Propagation is how far the newest change has got, per group, on this
// tracker's open streams.
type Propagation struct {
	// At is when the change was accepted (zero before the first).
	At     time.Time          `json:"at,omitzero"`
	Groups []GroupPropagation `json:"groups"`
}

// GroupPropagation is one group's progress. A stream takes part when it should
// hold a type version the change introduced; it is done once it has ACKed
// every such version, at the time of the last of those first ACKs.
type GroupPropagation struct {
	Group string `json:"group"`
	// Total counts the streams taking part, Done those that are done.
	Total int `json:"total"`
	Done  int `json:"done"`
	// DoneAfter is, sorted, how long after At each done stream finished
	// (a stream that connected after At finishes when it ACKs).
	DoneAfter []time.Duration `json:"-"`
	// Pending lists streams not done yet (at most maxPending; PendingTotal
	// counts them all).
	Pending      []PendingStream `json:"pending"`
	PendingTotal int             `json:"pendingTotal"`
}

// PendingStream is a stream that has not ACKed the newest change, and the
// states of its types.
type PendingStream struct {
	Stream uint64            `json:"stream"`
	Node   string            `json:"node"`
	States map[string]string `json:"states"`
}

// noteChange records the type versions of a publish that were new, as the
// newest change. A publish that introduced nothing new (the same content
// again) leaves the newest change as it was. Called locked, with the
// accepted set not yet updated.
func (t *Tracker) noteChange(versions map[string][]string, at time.Time) {
	keys := map[acceptKey]bool{}
	accepted := *t.accepted.Load()
	for url, vs := range versions {
		for _, v := range vs {
			if k := (acceptKey{url, v}); v != "" {
				if _, known := accepted[k]; !known {
					keys[k] = true
				}
			}
		}
	}
	if len(keys) > 0 {
		t.change = changeState{at: at, keys: keys}
	}
}

// Propagation reports, per group, which open streams have ACKed the newest
// change and when. It walks the open streams: call it per page view, not
// per event.
func (t *Tracker) Propagation() Propagation {
	t.mu.Lock()
	change := t.change // its keys are replaced, never written
	t.mu.Unlock()
	out := Propagation{At: change.at, Groups: []GroupPropagation{}}
	if len(change.keys) == 0 {
		return out
	}
	byGroup := map[string]*GroupPropagation{}
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, s := range sh.streams {
			t.propagationOf(s, change, byGroup, &buf)
		}
		sh.mu.Unlock()
	}
	for _, g := range byGroup {
		slices.Sort(g.DoneAfter)
		sort.Slice(g.Pending, func(i, j int) bool { return g.Pending[i].Node < g.Pending[j].Node })
		if len(g.Pending) > maxPending {
			g.Pending = g.Pending[:maxPending]
		}
		out.Groups = append(out.Groups, *g)
	}
	sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i].Group < out.Groups[j].Group })
	return out
}

// propagationOf counts s, if open and in a group, in its group's progress
// through change.
func (t *Tracker) propagationOf(s *stream, change changeState, byGroup map[string]*GroupPropagation, buf *Stamps) {
	group := s.groupOf()
	if s.gone != nil || group == NoGroup {
		return
	}
	part, done, at := t.progress(s, change, buf)
	if !part {
		return
	}
	g := byGroup[group]
	if g == nil {
		g = &GroupPropagation{Group: group, Pending: []PendingStream{}}
		byGroup[group] = g
	}
	g.Total++
	if done {
		g.Done++
		g.DoneAfter = append(g.DoneAfter, max(at.Sub(change.at), 0))
		return
	}
	g.PendingTotal++
	g.Pending = append(g.Pending, t.pending(s, buf))
}

// progress says whether s takes part in change, whether it is done, and
// when it finished.
func (t *Tracker) progress(s *stream, change changeState, buf *Stamps) (part, done bool, at time.Time) {
	done = true
	for i := range s.types {
		e := &s.types[i]
		p := t.stamps(s, e, buf)
		_, expected := t.state(s, e, p)
		set := expected
		if p.ExpectedSet != "" {
			set = p.ExpectedSet
		}
		if !change.keys[acceptKey{e.kind.url, set}] {
			continue
		}
		part = true
		if p.ACKed.At.IsZero() || p.ACKed.Version != expected {
			done = false
			continue
		}
		if p.ACKedSince.After(at) {
			at = p.ACKedSince
		}
	}
	return part, done, at
}

// pending is s as a stream the propagation waits for.
func (t *Tracker) pending(s *stream, buf *Stamps) PendingStream {
	p := PendingStream{Stream: s.id, Node: s.node, States: map[string]string{}}
	for i := range s.types {
		e := &s.types[i]
		state, _ := t.state(s, e, t.stamps(s, e, buf))
		p.States[e.kind.name] = stateNames[state]
	}
	return p
}
