// Package status is what happens on the xDS streams and what it adds up
// to: the events the xds server reports (Event, its kinds, Observer,
// ComposeObservers) and the tracker of the proxies connected to this
// Pylon: who they are, how they connect, which group they are in, and per
// resource type what was sent, ACKed and NACKed. It sits below the server:
// fed plain values, and reading what a stream keeps of itself through an
// interface of its own (Live), it imports nothing of Pylon's but the
// cowmap utility and the model's node (Event.Member), and no Envoy or
// gRPC type.
package status

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/cowmap"
)

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
	// of a change: for a live stream, the newest version it took since
	// the last harvest (Harvest). It is called with a lock of the
	// tracker's held, from whoever reads (a scrape, a status request) or
	// ends a stream: it must not call the Tracker. A new stream's
	// initial config is not a push of a change (timed from the change,
	// it would count how long ago the config last changed): the server
	// reports it as TypeSynced. It is given the type's name (Abbrev),
	// kept with the type's latencies: every stream's ACK of every change
	// comes here, and a lookup of the name cost each one.
	OnLatency func(typeName string, d time.Duration)
}

// Tracker holds the streams. Memory is bounded: per open stream, one entry
// per type it uses; closed streams for Retention, at most MaxGone.
//
// A stream fed by an xds server is live (Attach): what it sent, what its
// client ACKed and should hold, the stream keeps, and the tracker reads it
// when asked (Live). Told on every push instead, the tracker added to
// every change's CPU what the fleet benchmark's rows of pylon against
// pylon-unobserved measure (bench/fleet -delta -n 5000 -clusters 100
// -eds 40 -impl pylon-unobserved,pylon; docs/benchmarks-log.md, issue
// 18's sixth pass): three events per stream, each written into memory of
// the tracker's that was cold by then. The tracker is told only
// of rarer things: a stream's open, group, subscriptions, NACKs and end.
//
// The streams are spread over shards, each under a lock of its own: every
// stream's events come from the xds server's goroutines on every core at
// once, and one lock for all would make them take turns. What is not a
// stream's (the closed list, the accepted versions, latencies, the
// newest change, shared names) is under mu, which is taken last: code
// holding mu takes no shard's lock. A live stream's status locks are
// taken under a shard's, and a stream reports nothing while it holds one.
type Tracker struct {
	// shards first: they then start 8 bytes (the allocation's header)
	// past a cache line, which each shard's padding absorbs
	// (TestShardFillsCacheLines); after Options they started 56 past.
	shards [nShards]shard

	opts Options

	// accepted holds when each type version was accepted, read by every
	// ACK without a lock: replaced on a publish that adds to it, never
	// written. order is its keys, oldest first (under mu).
	accepted atomic.Pointer[map[acceptKey]time.Time]
	// released holds, per accepted version a staged rollout held back,
	// when it reached more of its group's nodes (Released); read like
	// accepted, replaced under mu.
	released atomic.Pointer[map[acceptKey][]time.Time]
	// latency holds the newest push latencies per type URL, read and
	// added to without a lock (ring).
	latency cowmap.Map[string, *ring]

	mu    sync.Mutex
	gone  []goneStream
	order []acceptKey
	// change is the newest change, for Propagation.
	change changeState
	// kinds holds the type URLs and names the entries share, clients the
	// client names the streams share (a fleet runs a few versions). Every
	// new stream and entry reads them, without a lock.
	kinds   cowmap.Map[string, *kind]
	clients cowmap.Map[string, string]
}

// nShards is how many shards the streams are spread over: enough that
// two cores rarely meet on one.
const nShards = 32

// shard is some of the streams (by id), under its own lock.
type shard struct {
	mu      sync.Mutex
	streams map[uint64]*stream
	// dropped holds, per type URL, the counts of the streams let go
	// (pruned, forgotten): Totals adds them to those of the streams kept,
	// under the same lock, so that no count is lost or counted twice.
	dropped map[string]Totals
	// Apart from the next shard's: two cores on neighbouring shards would
	// otherwise share a cache line.
	_ [40]byte
}

// goneStream is a closed stream kept for Retention.
type goneStream struct {
	id uint64
	at time.Time
}

// What the tracker keeps is laid out for a fleet of streams: every stream
// has an entry per type, so an entry is one small value in its stream's
// slice, sharing its type's URL and name. A live stream's stamps are the
// stream's own (Live); once it ended, what it last said hangs off a
// pointer. Streams turns them into Streams and Types.

// stream is the tracker's entry of one stream.
type stream struct {
	id                                              uint64
	node, cluster, group, peer, client, kind, ident string
	since                                           time.Time
	gone                                            *time.Time
	// live reads the stream's stamps and group while it is open (nil
	// before Attach and once the stream ended): see Attach.
	live  Live
	types []entry // sorted by name
	more  *streamMore
}

// streamMore is what few streams have.
type streamMore struct {
	refused *Refusal
}

// kind is a type URL and its name, shared by the entries of the type.
type kind struct{ url, name string }

// maxKinds and maxClients bound the kinds and client names a tracker
// shares.
const (
	maxKinds   = 256
	maxClients = 64
)

// entry is a stream's state for one type. Its stamps are, while the
// stream is live, read from the stream (Tracker.stamps), and once it
// ended, what it last said (p).
type entry struct {
	kind *kind
	sub  *Subscription
	// lastNACK stays after a later ACK.
	lastNACK *NACK
	p        *Stamps
	// measured is, on a live stream, when the newest version whose push
	// latency was measured was first ACKed (Unix nanoseconds; Harvest).
	measured int64
}

// Stamps is a stream's state of one type: what it should hold, what it
// was sent, and what it ACKed (a zero At: none).
type Stamps struct {
	// Expected is the version the stream should hold rather than its
	// group's ("": its group's), ExpectedSet the version of the group's
	// whole set it was planned from, where the two differ: which change
	// the stream takes part in, for Propagation.
	Expected, ExpectedSet string
	Sent, ACKed           Stamp
	// ACKedSince is when ACKed.Version was first ACKed on the stream (a
	// later ACK of the same version does not move it): when the proxy
	// took the change, for Propagation.
	ACKedSince time.Time
	// LastSent is what the last response carried (shared, read-only),
	// LastRemoved what it removed.
	LastSent    []proto.Message
	LastRemoved []string
	// Responses and ResponseBytes count the responses sent of the type
	// (heartbeats included) and their encoded size, ACKs the ACKs.
	Responses, ResponseBytes, ACKs uint64
}

// Live reads a live stream's group and, per type, its Stamps. Each call
// must be safe at any time, from any goroutine, and must not wait on the
// stream's I/O.
type Live interface {
	Group() string
	// Stamps fills *into with the stream's stamps of typeURL and reports
	// whether it has any.
	Stamps(typeURL string, into *Stamps) bool
}

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
	t := &Tracker{opts: opts}
	t.accepted.Store(&map[acceptKey]time.Time{})
	for i := range t.shards {
		t.shards[i].streams, t.shards[i].dropped = map[uint64]*stream{}, map[string]Totals{}
	}
	return t
}

// shardOf is the shard stream id is in.
func (t *Tracker) shardOf(id uint64) *shard { return &t.shards[id%nShards] }

// lock locks stream id's shard and returns it.
func (t *Tracker) lock(id uint64) *shard {
	sh := t.shardOf(id)
	sh.mu.Lock()
	return sh
}

// Info is who a stream's proxy is. Client is "Agent AgentVersion", put
// together only when the stream's entry is made: Info comes with every
// event, and most find the entry there.
type Info struct {
	Node, Cluster, Peer, Kind string
	Agent, AgentVersion       string
	Identity                  string
}

// Who says who a stream's proxy is. The tracker asks only when it first
// meets the stream: a feeder passes a view of its event, and the fields
// behind it (the node, out of every processor's cache by the time a
// change reaches the stream) are not read again for every event.
type Who interface{ Info() Info }

// Info is its own Who.
func (i Info) Info() Info { return i }

// stream returns the entry of id, creating it from who. A lookup: what
// comes for every stream on every change a live stream keeps itself, so
// the tracker is told only of rarer things.
func (t *Tracker) stream(sh *shard, id uint64, who Who, at time.Time) *stream {
	s := sh.streams[id]
	if s == nil {
		s = t.newStream(sh, id, who, at)
	}
	return s
}

// newStream makes stream id's entry. Apart from stream, and not inlined:
// its frame (who's Info, the entry's strings) would otherwise be taken on
// every event, on the xds stream's goroutine, whose stack must stay
// within 8 KB (see the daemon's TestStreamStacksStayAt8KB).
//
//go:noinline
func (t *Tracker) newStream(sh *shard, id uint64, who Who, at time.Time) *stream {
	info := who.Info()
	// The strings are the client's and stay after the stream is gone:
	// bounded here too, whatever the feeder already did.
	s := &stream{
		id: id, node: cut(info.Node), cluster: cut(info.Cluster), peer: cut(info.Peer),
		client: t.client(info), kind: info.Kind, ident: cut(info.Identity),
		since: at, group: NoGroup,
	}
	sh.streams[id] = s
	return s
}

// client is info's client name, shared with the streams of the same.
func (t *Tracker) client(info Info) string {
	if c, ok := t.clients.Load()[info.Agent+" "+info.AgentVersion]; ok {
		return c
	}
	c := cut(info.Agent + " " + info.AgentVersion)
	if len(c) > 64 {
		return c
	}
	return t.clients.LoadOrStore(c, c, maxClients)
}

// entryOf returns s's entry of url, or nil.
func (s *stream) entryOf(url string) *entry {
	for i := range s.types {
		if s.types[i].kind.url == url {
			return &s.types[i]
		}
	}
	return nil
}

// kindOf returns the kind of url named name, shared when it can be.
func (t *Tracker) kindOf(url, name string) *kind {
	if k := t.kinds.Load()[url]; k != nil && k.name == name {
		return k
	}
	k := &kind{url: url, name: name}
	t.kinds.Store(url, k, maxKinds)
	return k
}

// typ returns stream id's entry of typeURL, creating both as needed. The
// entry is valid until the stream's next new type.
func (t *Tracker) typ(sh *shard, id uint64, who Who, typeURL string, at time.Time) (*stream, *entry) {
	s := t.stream(sh, id, who, at)
	if e := s.entryOf(typeURL); e != nil {
		return s, e
	}
	k := t.kindOf(typeURL, t.opts.Abbrev(typeURL))
	// After every entry of the same name or less: the order of Types.
	i := 0
	for i < len(s.types) && s.types[i].kind.name <= k.name {
		i++
	}
	if s.types == nil {
		// An ADS stream's types come one at a time: room for the usual
		// four at once.
		s.types = make([]entry, 0, 4)
	}
	s.types = insertEntry(s.types, i, k)
	return s, &s.types[i]
}

// insertEntry inserts a new entry of kind k at i. Not slices.Insert: its
// rotation took a 760-byte frame when entries were 216 bytes, and this
// runs on the xDS stream's goroutine, whose stack must stay within 8 KB (a
// stack that grows to 16 KB once never shrinks back while the stream
// waits for a request: 8 KB more for every proxy).
func insertEntry(types []entry, i int, k *kind) []entry {
	types = append(types, entry{})
	copy(types[i+1:], types[i:])
	types[i] = entry{kind: k}
	return types
}

// Seen records that stream id is open and in group ("" for none). A
// live stream's group is read from it (Attach).
func (t *Tracker) Seen(id uint64, who Who, group string, at time.Time) {
	sh := t.lock(id)
	defer sh.mu.Unlock()
	s := t.stream(sh, id, who, at)
	if group == "" {
		group = NoGroup
	}
	s.group = group
}

// Attach makes stream id live: from now until it ends, its group and
// stamps are read from live when asked. On its end the tracker keeps what
// live last said.
func (t *Tracker) Attach(id uint64, who Who, live Live, at time.Time) {
	sh := t.lock(id)
	defer sh.mu.Unlock()
	if s := t.stream(sh, id, who, at); s.gone == nil {
		s.live = live
	}
}

// Requested records that stream id asked for typeURL.
func (t *Tracker) Requested(id uint64, who Who, typeURL string, at time.Time) {
	sh := t.lock(id)
	defer sh.mu.Unlock()
	t.typ(sh, id, who, typeURL, at)
}

// The subscriptions most streams have, shared (read-only, as every kept
// Subscription is).
var (
	wildcardOnly = &Subscription{Wildcard: true}
	noNames      = &Subscription{}
)

// Subscribed records what stream id subscribes to of typeURL: the
// wildcard, the names, or both. Call it on every change of the
// subscription. names is kept as given when within the bounds (the xds
// server passes one sorted, read-only slice for every stream subscribed
// alike); otherwise a bounded, sorted copy.
func (t *Tracker) Subscribed(id uint64, who Who, typeURL string, wildcard bool, names []string, at time.Time) {
	var sub *Subscription
	switch {
	case names == nil && wildcard:
		sub = wildcardOnly
	case names == nil:
		sub = noNames
	case withinBounds(names):
		sub = &Subscription{Wildcard: wildcard, Names: names}
	default:
		sub = &Subscription{Wildcard: wildcard}
		for _, n := range names {
			if len(sub.Names) >= MaxSubscribedNames || len(n) > maxNameBytes {
				sub.Dropped++
				continue
			}
			sub.Names = append(sub.Names, n)
		}
		sort.Strings(sub.Names)
	}
	sh := t.lock(id)
	defer sh.mu.Unlock()
	_, e := t.typ(sh, id, who, typeURL, at)
	e.sub = sub
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

// NACKed records a rejection.
func (t *Tracker) NACKed(id uint64, who Who, typeURL string, n NACK) {
	n.Detail = cut(n.Detail)
	sh := t.lock(id)
	defer sh.mu.Unlock()
	_, e := t.typ(sh, id, who, typeURL, n.At)
	e.lastNACK = &n
}

// Refused records that the server ended stream id on purpose, and marks it
// gone like Closed: a stream refused at its first request shows up only
// here, with the node it claimed.
func (t *Tracker) Refused(id uint64, who Who, reason, detail string, at time.Time) {
	sh := t.lock(id)
	s := t.stream(sh, id, who, at)
	if s.more == nil {
		s.more = &streamMore{}
	}
	s.more.refused = &Refusal{Reason: reason, Detail: cut(detail), At: at}
	if s.gone == nil {
		t.end(s, at)
	}
	sh.mu.Unlock()
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
	sh := t.lock(id)
	if s := sh.streams[id]; s != nil && s.gone == nil {
		t.end(s, at)
	}
	sh.mu.Unlock()
	t.prune(at)
}

// end marks open stream s gone at at, and lists it among the closed. Its
// shard is locked: Forget of the same stream comes before or after, never
// between.
func (t *Tracker) end(s *stream, at time.Time) {
	t.freeze(s)
	s.gone = &at
	t.mu.Lock()
	t.gone = append(t.gone, goneStream{s.id, at})
	t.mu.Unlock()
}

// freeze keeps what a live stream last said and lets the stream go: a closed stream is shown as it ended. Its last push is
// measured (harvest): no later harvest reads it live.
func (t *Tracker) freeze(s *stream) {
	if s.live == nil {
		return
	}
	if g := s.live.Group(); g != "" {
		s.group = g
	} else {
		s.group = NoGroup
	}
	for i := range s.types {
		e := &s.types[i]
		var p Stamps
		if s.live.Stamps(e.kind.url, &p) {
			t.harvest(s, e, &p)
			e.p = &p
		}
	}
	s.live = nil
}

// prune drops the closed streams kept past Retention, or beyond MaxGone,
// oldest first.
func (t *Tracker) prune(now time.Time) {
	var drop []uint64
	t.mu.Lock()
	for len(t.gone) > 0 {
		g := t.gone[0]
		if len(t.gone) <= t.opts.MaxGone && now.Sub(g.at) < t.opts.Retention {
			break
		}
		drop = append(drop, g.id)
		t.gone = t.gone[1:]
	}
	t.mu.Unlock()
	for _, id := range drop {
		sh := t.lock(id)
		// Only if still gone: Forget may have dropped it already.
		if s := sh.streams[id]; s != nil && s.gone != nil {
			t.drop(sh, s)
		}
		sh.mu.Unlock()
	}
}

// stamps returns e's stamps: read from a live stream into buf, else
// those it last said (zero if none). Call with s's shard locked; the result is
// read-only, valid until buf is used again. A caller walking many streams
// passes one buf for all: a Stamps read through the Live interface
// escapes, and one per type of 10,000 streams made a scrape allocate
// 9.6 MB.
func (t *Tracker) stamps(s *stream, e *entry, buf *Stamps) *Stamps {
	*buf = Stamps{}
	switch {
	case s.live != nil:
		s.live.Stamps(e.kind.url, buf)
	case e.p != nil:
		return e.p
	}
	return buf
}

// drop lets stream s of shard sh go, keeping its counts in the shard's
// (call with sh locked).
func (t *Tracker) drop(sh *shard, s *stream) {
	var buf Stamps
	for i := range s.types {
		e := &s.types[i]
		p := t.stamps(s, e, &buf)
		d := sh.dropped[e.kind.url]
		d.Responses += p.Responses
		d.ResponseBytes += p.ResponseBytes
		d.ACKs += p.ACKs
		sh.dropped[e.kind.url] = d
	}
	delete(sh.streams, s.id)
}
