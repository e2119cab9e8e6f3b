package fleetstatus

import (
	"slices"
	"time"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// Peer is another live replica as its summary last said: what it serves,
// where, and how many xDS streams it holds.
type Peer struct {
	Replica string
	Self
	Streams int
	// sameShard: it serves the groups this replica serves (sameGroups),
	// worked out when the summaries are read, not for each new stream.
	sameShard bool
}

// Serves reports whether a replica publishing self serves group: every
// group when it names none.
func (s Self) Serves(group string) bool {
	return len(s.Groups) == 0 || nodegroup.AnyMatch(s.Groups, []string{group})
}

// fresh reports whether the others' summaries were read within their
// lease, with f.mu held: past it, a replica they list may be gone.
func (f *Fleet) fresh() bool {
	return f.unread == "" && !f.readAt.IsZero() && time.Since(f.readAt) <= f.opts.TTL
}

// Load is the load of this replica's shard (the replicas serving the same
// groups) for balancing: local is this replica's open streams, counted
// now; the others' are as last published, a draining replica's among
// them though it is not counted as a replica. A count not read within the
// lease is not Fresh, and balances nothing.
func (f *Fleet) Load(local int) guard.Load {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := guard.Load{Replicas: 1, Streams: local, Fresh: f.fresh()}
	for _, p := range f.peers {
		if !p.sameShard {
			continue
		}
		// A draining replica's streams are on their way to the others:
		// counted, but it is not one of the replicas to share them.
		l.Streams += p.Streams
		if !p.Draining {
			l.Replicas++
		}
	}
	return l
}

// ServedBy returns the live replicas that serve group, as last read, by
// name, but those draining; none when the summaries are not fresh (a replica they list may be
// gone).
func (f *Fleet) ServedBy(group string) []Peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.fresh() {
		return nil
	}
	var out []Peer
	for _, p := range f.peers {
		if p.Serves(group) && !p.Draining {
			out = append(out, p)
		}
	}
	return out
}

// Peers returns the other live replicas as last read, by name.
func (f *Fleet) Peers() []Peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peers
}

// sameGroups reports whether two replicas' --groups name the same
// patterns, in whatever order and repetition they were written.
func sameGroups(a, b []string) bool {
	norm := func(g []string) []string {
		g = slices.Clone(g)
		slices.Sort(g)
		return slices.Compact(g)
	}
	return slices.Equal(norm(a), norm(b))
}
