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
//
// The others' counts are a period old and this replica's is current: a
// fleet connecting through a balancer grows every replica alike, and each
// comparing its current count with the others' old ones refused
// (measured: 3 to 10 refusals a proxy while 3,000 connected). So each
// live peer is taken to have gained what this replica gained since its
// own summary; where the balancer sends all to one replica, it takes up
// to a period's arrivals over its share, which shedding then moves.
func (f *Fleet) Load(local int) guard.Load {
	f.mu.Lock()
	defer f.mu.Unlock()
	grown := max(local-f.published, 0)
	l := guard.Load{Replicas: 1, Streams: local, Least: -1, Fresh: f.fresh()}
	for _, p := range f.peers {
		if !p.sameShard {
			continue
		}
		// A draining replica's streams are on their way to the others:
		// counted, but it is not one of the replicas to share them.
		if p.Draining {
			l.Streams += p.Streams
			continue
		}
		n := p.Streams + grown
		l.Streams += n
		l.Replicas++
		if l.Least < 0 || n < l.Least {
			l.Least = n
		}
	}
	l.Least = max(l.Least, 0)
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
