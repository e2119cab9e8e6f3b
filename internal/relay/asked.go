package relay

import (
	"context"
	"slices"
	"time"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// A key subscribes upstream, by name, to what its resources name and to
// what its proxies ask for (the xDS server tells each stream's
// subscriptions: xds.Options.Admit's subscribed), and drops a name once
// neither does. A proxy asking for a name the key does not serve waits,
// up to Settle and a second, for the key's next build after its upstream
// answered (or said the name does not exist): then it is answered as
// Pylon answers it, with the resource or its absence.

// askedSub is what one stream asks for of one named type.
type askedSub struct {
	wildcard bool
	names    []string // sorted, read-only (the xDS server's)
}

// asked is what a key's proxies ask for of one named type: how many
// streams ask for each name, and for everything.
type asked struct {
	names    map[string]int
	wildcard int
	// last is the names a stream last asked for, kept for the next
	// stream asking the same to share (every proxy of a key asks alike:
	// a list a stream of 100 EDS names, and the request it was decoded
	// from, held per stream were 4 KiB a proxy of a relay's heap).
	last []string
}

// addAsked counts s for the key and returns what of it was counted: a
// name that would take the key's distinct names past maxAsked is left
// out (the proxy is told it does not exist). mu is held.
func (ks *keyState) addAsked(url string, s askedSub) askedSub {
	if ks.asked == nil {
		ks.asked = map[string]*asked{}
	}
	a := ks.asked[url]
	if a == nil {
		a = &asked{names: map[string]int{}}
		ks.asked[url] = a
	}
	if s.wildcard {
		a.wildcard++
	}
	if slices.Equal(s.names, a.last) {
		s.names = a.last
	} else if len(s.names) > 0 {
		a.last = s.names
	}
	out := askedSub{wildcard: s.wildcard, names: s.names}
	cut := false // out.names is a copy, less what was left out
	for i, n := range s.names {
		if a.names[n] == 0 && ks.askedNames >= ks.maxAsked {
			if !cut {
				cut, out.names = true, slices.Clone(s.names[:i])
			}
			continue
		}
		if cut {
			out.names = append(out.names, n)
		}
		if a.names[n]++; a.names[n] == 1 {
			ks.askedNames++
		}
	}
	return out
}

// dropAsked uncounts s, counted by addAsked; mu is held.
func (ks *keyState) dropAsked(url string, s askedSub) {
	a := ks.asked[url]
	if a == nil {
		return
	}
	if s.wildcard {
		a.wildcard--
	}
	for _, n := range s.names {
		if a.names[n]--; a.names[n] <= 0 {
			delete(a.names, n)
			ks.askedNames--
		}
	}
	if a.wildcard == 0 && len(a.names) == 0 {
		delete(ks.asked, url)
	}
}

// askedOf is what the key's proxies ask for of url, "*" first for
// everything; mu is held.
func (ks *keyState) askedOf(url string) []string {
	a := ks.asked[url]
	if a == nil {
		return nil
	}
	out := make([]string, 0, len(a.names)+1)
	if a.wildcard > 0 {
		out = append(out, "*")
	}
	for n := range a.names {
		out = append(out, n)
	}
	return out
}

// kickBuild wakes the key's builds: what it subscribes to changed.
func (ks *keyState) kickBuild() {
	select {
	case ks.kick <- struct{}{}:
	default:
	}
}

// subscribedFor is the xDS server's hook for m's stream: it counts what
// the stream asks for of a named type for the stream's key, and waits
// for what the key does not serve yet. Types relayed whole, Secrets and
// VirtualHosts are not counted.
func (r *Relay) subscribedFor(ctx context.Context, m *member) func(url string, wildcard bool, names []string) {
	return func(url string, wildcard bool, names []string) {
		if !r.named[url] {
			return
		}
		r.mu.Lock()
		ks := m.ks
		if old, ok := m.asked[url]; ok {
			ks.dropAsked(url, old)
			delete(m.asked, url)
		}
		if wildcard || len(names) > 0 {
			if m.asked == nil {
				m.asked = map[string]askedSub{}
			}
			m.asked[url] = ks.addAsked(url, askedSub{wildcard: wildcard, names: names})
		}
		wait := wildcard || !ks.serves(url, m.asked[url].names)
		since, quiet, life := ks.iter, ks.quiet, r.ctx
		r.mu.Unlock()
		ks.kickBuild()
		if wait {
			r.awaitBuild(ctx, life, ks, since, quiet)
		}
	}
}

// serves reports whether the key's published snapshot has each of names
// of url, or its upstream said it has none; mu is held.
func (ks *keyState) serves(url string, names []string) bool {
	var set *snapshot.Set
	if ks.served != nil {
		set = ks.served.Set(url)
	}
	for _, n := range names {
		if set.Get(n) == nil && !ks.client.Gone(url, n) {
			return false
		}
	}
	return true
}

// awaitBuild waits until a build of ks that began after since is over
// (published if it changed anything), up to Settle and a second, or
// until ctx (the stream) or the relay ends.
func (r *Relay) awaitBuild(ctx, life context.Context, ks *keyState, since uint64, quiet <-chan struct{}) {
	t := time.NewTimer(r.o.Settle + time.Second)
	defer t.Stop()
	for {
		select {
		case <-quiet:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-life.Done():
			return
		}
		r.mu.Lock()
		done := ks.quietIter > since
		quiet = ks.quiet
		r.mu.Unlock()
		if done {
			return
		}
	}
}

// built marks the key's build it (runKey's) over: what waits for it
// (awaitBuild) goes on. mu is not held.
func (r *Relay) built(ks *keyState, it uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks.quietIter = it
	close(ks.quiet)
	ks.quiet = make(chan struct{})
}
