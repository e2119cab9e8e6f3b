// Package status tracks the proxies connected to this Pylon: who they are,
// how they connect, which group they are in, and per resource type what was
// sent, ACKed and NACKed. It is a leaf: fed plain values, it imports nothing
// of Pylon's.
package status

import (
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

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

// Type is a stream's state for one resource type.
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
	url          string
	// counted is the state this type is counted under while its stream is
	// open ("" when not counted); everSynced is set once it was SYNCED,
	// so that the first sync is timed once.
	counted    string
	everSynced bool
	// ackedSince is when the version in ACKed was first ACKed on the
	// stream (a later ACK of the same version does not move it): when the
	// proxy took the change, for the rollout.
	ackedSince time.Time
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

// Stream is one xDS stream of a proxy.
type Stream struct {
	ID      uint64 `json:"stream"`
	Node    string `json:"node"`
	Cluster string `json:"cluster,omitempty"`
	Group   string `json:"group"`
	Peer    string `json:"address,omitempty"`
	Client  string `json:"client,omitempty"`
	Kind    string `json:"kind"` // "ADS", "ADS delta", "CDS", "CDS delta", ...
	// Identity is what the connection's verified client certificate
	// proves ("" without one): who the proxy is, as opposed to what its
	// node id claims.
	Identity string     `json:"identity,omitempty"`
	Since    time.Time  `json:"connectedSince"`
	Gone     *time.Time `json:"disconnectedAt,omitempty"`
	// Refused is set when the server ended the stream on purpose.
	Refused *Refusal `json:"refused,omitempty"`
	Types   []*Type  `json:"types"`
	// expected holds, per type URL, what this stream should hold rather
	// than its group's version (some of the group's Secrets are withheld
	// from it).
	expected map[string]string
	// expectedSet holds, per type URL, the version of the group's set the
	// expected version was planned from, where the two differ: which
	// change the stream takes part in, for the rollout.
	expectedSet map[string]string
	// implicit is how many of Types have no entry in expected, while the
	// stream is open: its share of Tracker.implicit.
	implicit int
}

// Refusal is why the server ended a stream: a reason from a small set
// (identity_mismatch, stalled, ...) and the message the client was given.
type Refusal struct {
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// maxDetail bounds the client-influenced text kept per entry.
const maxDetail = 4 << 10

// Options configures a Tracker.
type Options struct {
	// Expected returns the version a proxy of group should hold of a type
	// ("" if the group has none): what SYNCED compares with.
	Expected func(group, typeURL string) string
	// Abbrev names a type URL for people ("CDS").
	Abbrev func(typeURL string) string
	// Retention is how long a closed stream stays visible, so a flapping
	// proxy is seen; MaxGone bounds how many are kept.
	Retention time.Duration
	MaxGone   int
	// OnLatency, if set, is told each first ACK on a stream of a version
	// whose change was accepted after the stream opened: the push latency
	// of a change. A new stream's initial config is not a push of a change
	// (timed from the change, it would count how long ago the config last
	// changed): it goes to OnFirstSync.
	OnLatency func(typeURL string, d time.Duration)
	// OnFirstSync, if set, is told once per stream and type the time from
	// the stream's open to the type's first SYNCED state.
	OnFirstSync func(typeURL string, d time.Duration)
}

// Count is how many types named Type (e.g. "CDS") of open streams are in
// State.
type Count struct {
	Type  string
	State string
	N     int
}

// Tracker holds the streams. Memory is bounded: per open stream, one entry
// per type it uses; closed streams for Retention, at most MaxGone.
type Tracker struct {
	opts Options

	mu       sync.Mutex
	streams  map[uint64]*Stream
	gone     []uint64
	accepted map[string]time.Time // typeURL + version -> when the change was accepted
	order    []string             // accepted's keys, oldest first
	// counts holds, per type name and state, the open streams' types in
	// it, kept as each changes state: a metrics scrape reads these, in
	// O(types x states), never walking the streams.
	counts map[countKey]int
	// implicit counts the open streams' types without an expected version
	// of their own (Expect), which a publish must recount: with none, as
	// in a running Pylon, a publish walks no stream.
	implicit int
	// latency keeps the newest push latencies per type name; change is
	// the newest change, for Rollout.
	latency map[string]*ring
	change  rolloutState
}

type countKey struct{ typ, state string }

// NewTracker returns an empty tracker.
func NewTracker(opts Options) *Tracker {
	if opts.Expected == nil {
		opts.Expected = func(string, string) string { return "" }
	}
	if opts.Abbrev == nil {
		opts.Abbrev = func(u string) string { return u }
	}
	if opts.Retention == 0 {
		opts.Retention = 5 * time.Minute
	}
	if opts.MaxGone == 0 {
		opts.MaxGone = 1000
	}
	return &Tracker{opts: opts, streams: map[uint64]*Stream{}, accepted: map[string]time.Time{}, counts: map[countKey]int{}, latency: map[string]*ring{}}
}

// maxAccepted bounds the versions remembered for push latency.
const maxAccepted = 4096

// Published records that versions (type URL -> version) were accepted at
// at, so that ACKs of them measure push latency. Types whose expected
// version comes from Options.Expected (no Expect for them) are recounted:
// a publish changes what they should hold without an event of theirs.
func (t *Tracker) Published(versions map[string][]string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recountImplicit()
	t.noteChange(versions, at)
	for url, vs := range versions {
		for _, v := range vs {
			k := url + "\x00" + v
			if _, ok := t.accepted[k]; ok {
				continue
			}
			t.accepted[k] = at
			t.order = append(t.order, k)
		}
	}
	for len(t.order) > maxAccepted {
		delete(t.accepted, t.order[0])
		t.order = t.order[1:]
	}
}

// Info is who a stream's proxy is. Client is "Agent AgentVersion", put
// together only when the stream's entry is made: Info comes with every
// event, and most find the entry there.
type Info struct {
	Node, Cluster, Peer, Kind string
	Agent, AgentVersion       string
	Identity                  string
}

// stream returns the entry of id, creating it from info.
func (t *Tracker) stream(id uint64, info Info, at time.Time) *Stream {
	s := t.streams[id]
	if s == nil {
		// The strings are the client's and stay after the stream is gone:
		// bounded here too, whatever the feeder already did.
		s = &Stream{
			ID: id, Node: cut(info.Node), Cluster: cut(info.Cluster), Peer: cut(info.Peer),
			Client: cut(info.Agent + " " + info.AgentVersion), Kind: info.Kind, Identity: cut(info.Identity),
			Since: at, Group: NoGroup,
		}
		t.streams[id] = s
	}
	return s
}

func (s *Stream) typ(url string, abbrev func(string) string) *Type {
	for _, ty := range s.Types {
		if ty.url == url {
			return ty
		}
	}
	ty := &Type{Type: abbrev(url), url: url}
	s.Types = append(s.Types, ty)
	sort.Slice(s.Types, func(i, j int) bool { return s.Types[i].Type < s.Types[j].Type })
	return ty
}

// typ returns stream id's entry of typeURL, creating both as needed.
func (t *Tracker) typ(id uint64, info Info, typeURL string, at time.Time) (*Stream, *Type) {
	s := t.stream(id, info, at)
	n := len(s.Types)
	ty := s.typ(typeURL, t.opts.Abbrev)
	if len(s.Types) != n {
		t.reimplicit(s)
	}
	return s, ty
}

// reimplicit recomputes s's count of types without their own expected
// version (zero once it is gone) and the tracker's total; call it whenever
// s's types, expectations or openness change.
func (t *Tracker) reimplicit(s *Stream) {
	n := 0
	if s.Gone == nil {
		for _, ty := range s.Types {
			if _, own := s.expected[ty.url]; !own {
				n++
			}
		}
	}
	t.implicit += n - s.implicit
	s.implicit = n
}

// recount moves ty of s to the counter of its current state. It returns
// the time from the stream's open to at when this is the type's first
// SYNCED (zero otherwise), for the caller to report once unlocked.
func (t *Tracker) recount(s *Stream, ty *Type, at time.Time) time.Duration {
	state := t.state(s, ty)
	if s.Gone == nil && state != ty.counted {
		if ty.counted != "" {
			t.counts[countKey{ty.Type, ty.counted}]--
		}
		t.counts[countKey{ty.Type, state}]++
		ty.counted = state
	}
	if state != Synced || ty.everSynced {
		return 0
	}
	ty.everSynced = true
	return max(at.Sub(s.Since), time.Nanosecond)
}

// uncount takes a stream that is gone out of the counters.
func (t *Tracker) uncount(s *Stream) {
	for _, ty := range s.Types {
		if ty.counted != "" {
			t.counts[countKey{ty.Type, ty.counted}]--
			ty.counted = ""
		}
	}
}

// recountImplicit recounts the open streams' types that have no expected
// version of their own. The xds server reports one for every type it
// serves, so in a running Pylon there are none and nothing is walked.
func (t *Tracker) recountImplicit() {
	if t.implicit == 0 {
		return
	}
	for _, s := range t.streams {
		if s.Gone != nil {
			continue
		}
		for _, ty := range s.Types {
			if _, own := s.expected[ty.url]; !own {
				t.recount(s, ty, time.Now())
			}
		}
	}
}

// firstSync reports a first sync measured by recount; call unlocked.
func (t *Tracker) firstSync(typeURL string, d time.Duration) {
	if d > 0 && t.opts.OnFirstSync != nil {
		t.opts.OnFirstSync(typeURL, d)
	}
}

// Seen records that stream id is open and in group ("" for none).
func (t *Tracker) Seen(id uint64, info Info, group string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stream(id, info, at)
	if group == "" {
		group = NoGroup
	}
	if s.Group == group {
		return
	}
	s.Group = group
	for _, ty := range s.Types {
		// A stream in no group is NOT SENT whatever it holds; its first
		// sync is timed when it is synced in a group.
		t.recount(s, ty, at)
	}
}

// Requested records that stream id asked for typeURL.
func (t *Tracker) Requested(id uint64, info Info, typeURL string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ty := t.typ(id, info, typeURL, at)
	t.recount(s, ty, at)
}

// Subscribed records what stream id subscribes to of typeURL: the
// wildcard, the names, or both. Call it on every change of the
// subscription. names is kept as given when within the bounds (the xds
// server passes one sorted, read-only slice for every stream subscribed
// alike); otherwise a bounded, sorted copy.
func (t *Tracker) Subscribed(id uint64, info Info, typeURL string, wildcard bool, names []string, at time.Time) {
	sub := &Subscription{Wildcard: wildcard, Names: names}
	if !withinBounds(names) {
		sub.Names = nil
		for _, n := range names {
			if len(sub.Names) >= MaxSubscribedNames || len(n) > maxNameBytes {
				sub.Dropped++
				continue
			}
			sub.Names = append(sub.Names, n)
		}
		sort.Strings(sub.Names)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ty := t.typ(id, info, typeURL, at)
	ty.Subscription = sub
	t.recount(s, ty, at)
}

// withinBounds reports whether names can be kept as they are: sorted, at
// most MaxSubscribedNames, each at most maxNameBytes.
func withinBounds(names []string) bool {
	if len(names) > MaxSubscribedNames || !sort.StringsAreSorted(names) {
		return false
	}
	for _, n := range names {
		if len(n) > maxNameBytes {
			return false
		}
	}
	return true
}

// Sent records a response.
func (t *Tracker) Sent(id uint64, info Info, typeURL string, st Stamp, sent []proto.Message, removed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ty := t.typ(id, info, typeURL, st.At)
	ty.Sent, ty.LastSent, ty.LastRemoved = &st, sent, removed
	t.recount(s, ty, st.At)
}

// ACKed records an ACK. A version's first ACK on the stream measures the
// push latency of its change, if that change was accepted after the
// stream opened; a type's first SYNCED measures the stream's first sync.
func (t *Tracker) ACKed(id uint64, info Info, typeURL string, st Stamp) {
	t.mu.Lock()
	s, ty := t.typ(id, info, typeURL, st.At)
	first := ty.ACKed == nil || ty.ACKed.Version != st.Version
	if first {
		ty.ackedSince = st.At
	}
	ty.ACKed = &st
	key := st.Version
	if st.Set != "" {
		key = st.Set
	}
	accepted, known := t.accepted[typeURL+"\x00"+key]
	push := first && known && accepted.After(s.Since)
	if push {
		r := t.latency[ty.Type]
		if r == nil {
			r = &ring{}
			t.latency[ty.Type] = r
		}
		r.add(st.At.Sub(accepted))
	}
	synced := t.recount(s, ty, st.At)
	t.mu.Unlock()
	if push && t.opts.OnLatency != nil {
		t.opts.OnLatency(typeURL, st.At.Sub(accepted))
	}
	t.firstSync(typeURL, synced)
}

// NACKed records a rejection.
func (t *Tracker) NACKed(id uint64, info Info, typeURL string, n NACK) {
	n.Detail = cut(n.Detail)
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ty := t.typ(id, info, typeURL, n.At)
	ty.LastNACK = &n
	t.recount(s, ty, n.At)
}

// Refused records that the server ended stream id on purpose, and marks it
// gone like Closed: a stream refused at its first request shows up only
// here, with the node it claimed.
func (t *Tracker) Refused(id uint64, info Info, reason, detail string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stream(id, info, at)
	s.Refused = &Refusal{Reason: reason, Detail: cut(detail), At: at}
	if s.Gone == nil {
		t.uncount(s)
		s.Gone = &at
		t.reimplicit(s)
		t.gone = append(t.gone, id)
	}
	t.prune(at)
}

// cut bounds a client-influenced text.
func cut(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail] + "..."
}

// Closed marks stream id gone; it stays visible for the retention.
func (t *Tracker) Closed(id uint64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.streams[id]; s != nil && s.Gone == nil {
		t.end(s, at)
		t.gone = append(t.gone, id)
	}
	t.prune(at)
}

// end takes an open stream out of the counts as it closes at at.
func (t *Tracker) end(s *Stream, at time.Time) {
	t.uncount(s)
	s.Gone = &at
	t.reimplicit(s)
}

func (t *Tracker) prune(now time.Time) {
	for len(t.gone) > 0 {
		s := t.streams[t.gone[0]]
		if s != nil && len(t.gone) <= t.opts.MaxGone && now.Sub(*s.Gone) < t.opts.Retention {
			return
		}
		delete(t.streams, t.gone[0])
		t.gone = t.gone[1:]
	}
}

// Expect records that stream id should hold version of typeURL rather
// than its group's ("" : its group's again). The xds server says so for
// every type a stream asks for, so that SYNCED means the proxy holds the
// latest of every resource it subscribes to, not of its group's whole set.
func (t *Tracker) Expect(id uint64, info Info, typeURL, version string, at time.Time) {
	t.ExpectOf(id, info, typeURL, version, "", at)
}

// ExpectOf is Expect where version is the stream's own, planned from set,
// the version of the group's whole set of the type (a subscription to part
// of a set has a version of its own: X24); set says which published change
// the stream takes part in.
func (t *Tracker) ExpectOf(id uint64, info Info, typeURL, version, set string, at time.Time) {
	t.mu.Lock()
	s := t.stream(id, info, at)
	switch {
	case version != "":
		if s.expected == nil {
			s.expected = map[string]string{}
		}
		s.expected[typeURL] = version
	case s.expected != nil:
		delete(s.expected, typeURL)
	}
	switch {
	case version != "" && set != "" && set != version:
		if s.expectedSet == nil {
			s.expectedSet = map[string]string{}
		}
		s.expectedSet[typeURL] = set
	case s.expectedSet != nil:
		delete(s.expectedSet, typeURL)
	}
	t.reimplicit(s)
	var synced time.Duration
	for _, ty := range s.Types {
		if ty.url == typeURL {
			synced = t.recount(s, ty, at)
		}
	}
	t.mu.Unlock()
	t.firstSync(typeURL, synced)
}

// state is a type's state on a stream in group.
func (t *Tracker) state(s *Stream, ty *Type) string {
	expected, own := s.expected[ty.url]
	if !own {
		expected = t.opts.Expected(s.Group, ty.url)
	}
	ty.Expected = expected
	switch {
	case s.Group == NoGroup || ty.Sent == nil:
		return NotSent
	case ty.LastNACK != nil && (ty.ACKed == nil || ty.LastNACK.At.After(ty.ACKed.At)):
		return Nacked
	case ty.ACKed != nil && ty.ACKed.Version == expected && ty.ACKed.Version == ty.Sent.Version:
		// What was sent last is what was ACKed: nothing is in flight.
		return Synced
	}
	return Stale
}

// Streams returns copies of every stream, open and recently closed, by node
// then stream, with their states computed now.
func (t *Tracker) Streams() []Stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(time.Now())
	out := make([]Stream, 0, len(t.streams))
	for _, s := range t.streams {
		c := *s
		c.Types = make([]*Type, len(s.Types))
		for i, ty := range s.Types {
			tc := *ty
			tc.State = t.state(s, &tc)
			c.Types[i] = &tc
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// States counts the open streams' types by state, in O(types x states).
func (t *Tracker) States() map[string]int {
	out := map[string]int{Synced: 0, Stale: 0, Nacked: 0, NotSent: 0}
	for _, c := range t.Counts() {
		out[c.State] += c.N
	}
	return out
}

// Counts returns the open streams' types by type name and state, from
// counters kept as each changes state: O(types x states), whatever the
// number of streams. Sorted by type, then state.
func (t *Tracker) Counts() []Count {
	t.mu.Lock()
	out := make([]Count, 0, len(t.counts))
	for k, n := range t.counts {
		out = append(out, Count{Type: k.typ, State: k.state, N: n})
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].State < out[j].State
	})
	return out
}
