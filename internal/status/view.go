package status

import (
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"
)

// What readers of the tracker see (the admin pages, CSDS, the metrics,
// fleetstatus): the streams and their types as plain values, each type's
// state computed when read, and the counts and totals a scrape sums.

// Per-type states.
const (
	Synced  = "SYNCED"   // ACKed the latest for its group
	Stale   = "STALE"    // not (yet) ACKed the latest
	Nacked  = "NACKED"   // rejected what it was sent last
	NotSent = "NOT SENT" // nothing to send, or not requested
)

// NoGroup is what a proxy in no group shows: it receives nothing.
const NoGroup = "no matching group"

// Stamp is one response or answer.
type Stamp struct {
	Version   string    `json:"version"`
	Nonce     string    `json:"nonce,omitempty"`
	At        time.Time `json:"at"`
	Resources int       `json:"resources,omitempty"`
	// Set, when Version is the stream's own (a subscription to part of a
	// set: X24), is the version of the group's whole set that Version was
	// planned from: what a publish introduced, for push latency.
	Set string `json:"-"`
}

// NACK is a rejection, with the proxy's reason.
type NACK struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce,omitempty"`
	Detail  string    `json:"errorDetail"`
	At      time.Time `json:"at"`
}

// Type is a stream's state for one resource type, as Streams returns it.
type Type struct {
	Type     string `json:"type"` // e.g. "CDS"
	State    string `json:"state"`
	Expected string `json:"expectedVersion,omitempty"`
	Sent     *Stamp `json:"sent,omitempty"`
	ACKed    *Stamp `json:"acked,omitempty"`
	// LastNACK stays after a later ACK: history worth seeing.
	LastNACK *NACK `json:"lastNack,omitempty"`
	// LastSent is what the last response carried (shared, read-only),
	// and LastRemoved what it removed.
	LastSent    []proto.Message `json:"-"`
	LastRemoved []string        `json:"lastRemoved,omitempty"`
	// Subscription is what the stream subscribes to of the type (nil: not
	// told), shared and read-only: replaced, never written.
	Subscription *Subscription `json:"subscription,omitempty"`
}

// Subscription is what a stream subscribes to of one type: the wildcard
// (everything its group has), names, or both. Knowing it, a state-of-the-
// world Listener or Cluster set the proxy lacks a resource of can be told
// from a proxy that never asked for it (proxyless gRPC subscribes by name).
type Subscription struct {
	Wildcard bool `json:"wildcard,omitempty"`
	// Names are the explicit names, sorted, at most MaxSubscribedNames of
	// them, each at most maxNameBytes; Dropped counts those left out.
	Names   []string `json:"names,omitempty"`
	Dropped int      `json:"dropped,omitempty"`
}

// Bounds on a subscription kept per stream and type: the names are the
// client's. A name longer than any Pylon accepts is no resource's.
const (
	MaxSubscribedNames = 10000
	maxNameBytes       = 1024
)

// Stream is one xDS stream of a proxy, as Streams returns it.
type Stream struct {
	ID      uint64 `json:"stream"`
	Node    string `json:"node"`
	Cluster string `json:"cluster,omitempty"`
	Group   string `json:"group"`
	Peer    string `json:"address,omitempty"`
	Client  string `json:"client,omitempty"`
	// Implementation and ImplementationVersion are what Client reads as
	// (Implementation): grpc-go, grpc-core, grpc-js or envoy; "" for
	// another client. The client's word, as Client is.
	Implementation        string `json:"implementation,omitempty"`
	ImplementationVersion string `json:"implementationVersion,omitempty"`
	Kind                  string `json:"kind"` // "ADS", "ADS delta", "CDS", "CDS delta", ...
	// Identity is what the connection's verified client certificate
	// proves ("" without one): who the proxy is, as opposed to what its
	// node id claims.
	Identity string     `json:"identity,omitempty"`
	Since    time.Time  `json:"connectedSince"`
	Gone     *time.Time `json:"disconnectedAt,omitempty"`
	// Refused is set when the server ended the stream on purpose.
	Refused *Refusal `json:"refused,omitempty"`
	Types   []*Type  `json:"types"`
}

// Refusal is why the server ended a stream: a reason from a small set
// (identity_mismatch, stalled, ...) and the message the client was given.
type Refusal struct {
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// Count is how many types named Type (e.g. "CDS") of open streams are in
// State.
type Count struct {
	Type  string
	State string
	N     int
}

// Totals is what was sent and ACKed of a type, on every stream.
type Totals struct {
	Type                           string // the type's name ("CDS")
	Responses, ResponseBytes, ACKs uint64
}

// state is a state's index in stateNames.
type state uint8

var stateNames = [...]string{"", NotSent, Stale, Nacked, Synced}

const (
	notSent state = iota + 1
	stale
	nacked
	synced
)

// groupOf is s's group now. Call with s's shard locked.
func (s *stream) groupOf() string {
	if s.live == nil {
		return s.group
	}
	if g := s.live.Group(); g != "" {
		return g
	}
	return NoGroup
}

// state is the state of e on stream s with stamps p, and the version s
// should hold.
func (t *Tracker) state(s *stream, e *entry, p *Stamps) (state, string) {
	group := s.groupOf()
	expected := p.Expected
	if expected == "" {
		expected = t.opts.Expected(group, e.kind.url)
	}
	acked := !p.ACKed.At.IsZero()
	switch {
	case group == NoGroup || p.Sent.At.IsZero():
		return notSent, expected
	case e.lastNACK != nil && (!acked || e.lastNACK.At.After(p.ACKed.At)):
		return nacked, expected
	case acked && p.ACKed.Version == expected && p.ACKed.Version == p.Sent.Version:
		// What was sent last is what was ACKed: nothing is in flight.
		return synced, expected
	}
	return stale, expected
}

// Streams returns copies of every stream, open and recently closed, by node
// then stream, with their states computed now.
func (t *Tracker) Streams() []Stream {
	t.prune(time.Now())
	var out []Stream
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		out = slices.Grow(out, len(sh.streams))
		for _, s := range sh.streams {
			out = append(out, t.export(s, &buf))
		}
		sh.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// export is a copy of s as a Stream, its states computed now (buf: see
// stamps).
func (t *Tracker) export(s *stream, buf *Stamps) Stream {
	c := Stream{
		ID: s.id, Node: s.node, Cluster: s.cluster, Group: s.groupOf(), Peer: s.peer, Client: s.client, Kind: s.kind,
		Identity: s.ident, Since: s.since, Gone: s.gone, Types: make([]*Type, len(s.types)),
	}
	c.Implementation, c.ImplementationVersion = Implementation(s.client)
	types := make([]Type, len(s.types))
	var stamps []Stamp
	for i := range s.types {
		e, ty := &s.types[i], &types[i]
		p := t.stamps(s, e, buf)
		state, expected := t.state(s, e, p)
		*ty = Type{Type: e.kind.name, State: stateNames[state], Expected: expected, LastSent: p.LastSent, LastRemoved: p.LastRemoved, Subscription: e.sub, LastNACK: e.lastNACK}
		if (!p.Sent.At.IsZero() || !p.ACKed.At.IsZero()) && stamps == nil {
			stamps = make([]Stamp, 2*len(s.types))
		}
		if !p.Sent.At.IsZero() {
			ty.Sent = &stamps[2*i]
			*ty.Sent = p.Sent
		}
		if !p.ACKed.At.IsZero() {
			ty.ACKed = &stamps[2*i+1]
			*ty.ACKed = p.ACKed
		}
		c.Types[i] = ty
	}
	if m := s.more; m != nil {
		c.Refused = m.refused
	}
	return c
}

// States counts the open streams' types by state.
func (t *Tracker) States() map[string]int {
	out := map[string]int{Synced: 0, Stale: 0, Nacked: 0, NotSent: 0}
	for _, c := range t.Counts() {
		out[c.State] += c.N
	}
	return out
}

// Counts returns the open streams' types by type name and state, their
// states computed now: a walk of every open stream (a metrics scrape every
// few seconds reads it; every change of every stream would otherwise pay
// to keep counts). Every state of every type a stream ever had is listed,
// zero or not, so that a series drops to zero rather than vanishing.
// Sorted by type, then state.
func (t *Tracker) Counts() []Count {
	type key struct {
		typ string
		st  state
	}
	sum := map[key]int{}
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, s := range sh.streams {
			if s.gone != nil {
				continue
			}
			for i := range s.types {
				e := &s.types[i]
				st, _ := t.state(s, e, t.stamps(s, e, &buf))
				sum[key{e.kind.name, st}]++
			}
		}
		sh.mu.Unlock()
	}
	names := map[string]bool{}
	for _, k := range t.kinds.Load() {
		names[k.name] = true
	}
	for k := range sum {
		names[k.typ] = true
	}
	for name := range names {
		for st := notSent; st <= synced; st++ {
			sum[key{name, st}] += 0
		}
	}
	out := make([]Count, 0, len(sum))
	for k, n := range sum {
		out = append(out, Count{Type: k.typ, State: stateNames[k.st], N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].State < out[j].State
	})
	return out
}

// Totals returns, per type, the responses sent and ACKs received on every
// stream since the tracker started, by type name: what the streams count
// for themselves (a live stream's own counters), summed when asked.
func (t *Tracker) Totals() []Totals {
	sum := map[string]Totals{}
	add := func(url string, r, b, a uint64) {
		x := sum[url]
		x.Responses += r
		x.ResponseBytes += b
		x.ACKs += a
		sum[url] = x
	}
	var buf Stamps
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for url, d := range sh.dropped {
			add(url, d.Responses, d.ResponseBytes, d.ACKs)
		}
		for _, s := range sh.streams {
			for i := range s.types {
				e := &s.types[i]
				p := t.stamps(s, e, &buf)
				add(e.kind.url, p.Responses, p.ResponseBytes, p.ACKs)
			}
		}
		sh.mu.Unlock()
	}
	out := make([]Totals, 0, len(sum))
	for url, x := range sum {
		x.Type = t.opts.Abbrev(url)
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
