package relay

import (
	"time"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// member is one downstream stream of a key: its node (with group keys
// only: a change of the rules moves it), the key it counts for now, and
// what it asks for of the named types (asked.go), which counts for its
// key with it.
type member struct {
	node  nodegroup.Node
	ks    *keyState
	asked map[string]askedSub
}

// addMember counts m for ks; mu is held.
func (ks *keyState) addMember(m *member) {
	if ks.members == nil {
		ks.members = map[*member]struct{}{}
	}
	ks.members[m] = struct{}{}
	m.ks = ks
	for url, s := range m.asked {
		m.asked[url] = ks.addAsked(url, s)
	}
	if len(m.asked) > 0 {
		ks.kickBuild()
	}
}

// dropMember ends m's use of its key; mu is held. What it asked for is
// dropped upstream unless another proxy of the key asks for it too.
func (ks *keyState) dropMember(m *member) {
	delete(ks.members, m)
	if ks.streams--; ks.streams == 0 {
		ks.idleSince = time.Now()
	}
	for url, s := range m.asked {
		ks.dropAsked(url, s)
	}
	if len(m.asked) > 0 {
		ks.kickBuild()
	}
}

// moveTo counts m for to instead of its key; mu is held.
func (m *member) moveTo(to *keyState) {
	m.ks.dropMember(m)
	to.streams++
	to.addMember(m)
}

// rekey follows a change of the upstream's group rules. Each connected
// proxy whose group changed counts for its new group's key from now, the
// key started if it was not held. A key whose upstream stream announces
// a node the new rules put in another group (the upstream now feeds it
// that group's config) is made again with the node of one of its
// proxies, serving what it held until its new stream's config comes; one
// no proxy uses is stale: left out of the fleet once the new rules apply,
// made again by the next proxy of its group (Admit), dropped when idle. The keys' rules in the fleet change once every
// key with proxies has its config (applyPending): until then each proxy
// keeps its old group's config, and then moves to its new group's on the
// stream it has, as any Pylon moves a proxy between groups (the new
// config sent before what it replaces is removed).
func (r *Relay) rekey(now time.Time) {
	rules, ok := r.o.Groups.Current()
	if !ok {
		return
	}
	var stopped, fresh []*keyState
	r.mu.Lock()
	if r.ctx == nil || r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.pending = rules
	moved := 0
	for _, ks := range r.snapshotKeysLocked() {
		for m := range ks.members {
			k, err := r.groupKeyOf(m.node)
			if err != nil || k.Name == ks.key.Name {
				continue // of no group now: it keeps what it has
			}
			to := r.keys[k.Name]
			if to != nil && to.stale {
				to = r.revive(to, k, rules)
			}
			if to == nil {
				if len(r.keys) >= r.o.MaxKeys {
					r.o.Logger.Warn("relay: a proxy's group changed, but its new key would pass --max-keys: it keeps its old key", "node", m.node.ID, "key", k.Name)
					continue
				}
				to = r.newKey(k, nil)
				fresh = append(fresh, to)
			}
			ks.movedFrom = true
			m.moveTo(to)
			moved++
		}
	}
	for _, ks := range r.snapshotKeysLocked() {
		if ks.key.As == nil || ks.key.Group == nil || announcesItsGroup(rules, ks.key) {
			continue
		}
		if len(ks.members) == 0 {
			ks.stale = true
			continue
		}
		again, ok := r.remake(ks)
		if !ok {
			continue
		}
		stopped = append(stopped, ks)
		fresh = append(fresh, again)
	}
	for _, ks := range stopped {
		ks.stop()
	}
	r.mu.Unlock()
	for _, ks := range stopped {
		<-ks.done // its builds over: the new key alone writes its file
		r.countDropped(ks)
	}
	r.mu.Lock()
	for _, ks := range fresh {
		if r.keys[ks.key.Name] == ks {
			r.goKey(ks)
		}
	}
	r.mu.Unlock()
	if moved+len(stopped) > 0 {
		r.o.Logger.Info("relay: the upstream's group rules changed: proxies moved to their new groups' keys", "moved", moved, "keys_made_again", len(stopped))
	}
	r.publish(now)
}

// countDropped adds the upstream streams of ks, stopped, to the total.
func (r *Relay) countDropped(ks *keyState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.countDroppedLocked(ks)
}

// countDroppedLocked is countDropped with mu held.
func (r *Relay) countDroppedLocked(ks *keyState) {
	_, _, n := ks.client.Connected()
	r.droppedStreams += uint64(n)
}

// renew replaces ks, stale, by a key for k (a proxy of its group came):
// ks's config is another group's now, so nothing of it is kept; ks's
// stream is stopped. mu is held; the new key is started.
func (r *Relay) renew(ks *keyState, k Key) *keyState {
	ks.stop()
	r.countDroppedLocked(ks)
	again := r.newKey(k, nil)
	r.goKey(again)
	r.o.Logger.Info("relay: a stale key is made again for a proxy of its group", "key", k.Name)
	return again
}

// revive returns ks, stale, for a proxy of key k: ks itself when rules
// put the node its stream announces back in its group (the rules went
// and came back: what it holds is its group's config still, which a new
// key would not have while the upstream is away), else a new key
// (renew). mu is held.
func (r *Relay) revive(ks *keyState, k Key, rules nodegroup.Groups) *keyState {
	if ks.key.As != nil && announcesItsGroup(rules, ks.key) {
		ks.stale = false
		return ks
	}
	return r.renew(ks, k)
}

// announcesItsGroup reports whether the node k's upstream stream announces
// is, under rules, in k's group.
func announcesItsGroup(rules nodegroup.Groups, k Key) bool {
	as := *k.As
	as.Identities = nil
	i := rules.Resolve(as)
	return i >= 0 && rules[i].Name == k.Name
}

// remake replaces ks, whose stream announces a node of another group now,
// by a key of the same group announcing the node of one of its proxies;
// it serves what ks held until its own stream's config comes, and takes
// ks's proxies. mu is held; the new key is not started.
func (r *Relay) remake(ks *keyState) (*keyState, bool) {
	for m := range ks.members {
		k, err := r.groupKeyOf(m.node)
		if err != nil || k.Name != ks.key.Name {
			continue
		}
		// It resumes what ks's client holds, so that what it serves
		// meanwhile is its own client's, expiring with it: a TTL'd
		// resource copied in the snapshot alone was heartbeaten on with
		// no upstream refreshing it. (Its TTL starts again at the remake,
		// at most one TTL more.)
		again := r.newKey(k, ks.client.State())
		again.snap, again.valid, again.heldBack, again.kept = ks.snap, ks.valid, ks.heldBack, ks.kept
		for m := range ks.members {
			m.moveTo(again)
		}
		again.idleSince = ks.idleSince
		return again, true
	}
	return nil, false
}

// applyPending makes the rules read last the keys' rules in the fleet,
// once every key with proxies has its config or waited maxGroupWait for
// it (a key whose upstream never answers holds no change back); mu is
// held.
func (r *Relay) applyPending(now time.Time) {
	if r.pending == nil {
		return
	}
	for _, ks := range r.keys {
		if ks.streams > 0 && r.waits(ks, now) {
			return
		}
	}
	byName := map[string]nodegroup.Group{}
	for _, g := range r.pending {
		byName[g.Name] = g
	}
	for _, ks := range r.keys {
		if g, ok := byName[ks.key.Name]; ok && ks.key.Group != nil {
			ks.key.Group = &g // read under mu: persist copies the key with it held
		}
	}
	r.pending = nil
	for _, ks := range r.keys {
		ks.movedFrom = false
	}
}

// snapshotKeysLocked are the keys now; mu is held.
func (r *Relay) snapshotKeysLocked() []*keyState {
	out := make([]*keyState, 0, len(r.keys))
	for _, ks := range r.keys {
		out = append(out, ks)
	}
	return out
}
