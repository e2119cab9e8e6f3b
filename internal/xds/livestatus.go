package xds

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/status"
)

// A stream keeps its own status: per type, what it sent, what its client
// ACKed and what the client should hold, written as it happens, in memory
// the stream touches anyway. Status reads it when asked (StreamStatus)
// rather than being told on every push: an event per stream for each of
// the expected version, the response and the ACK of a change, each
// written into the tracker's memory for that stream (cold by then), cost
// a fleet's changes measurably more CPU than not observing at all: the
// fleet benchmark's pylon rows against its pylon-unobserved ones
// (bench/fleet -impl pylon,pylon-unobserved; docs/BENCHMARKS.md, "what
// observing a stream costs").

// StreamStatus is a stream's status, read on demand: the status.Live of
// the stream's events (status.Event.Status), from its StreamOpened on.
// Reading takes a lock the stream holds only while it writes a few
// fields: never across I/O, so a stalled client does not stall whoever
// reads. The per-type records live in the stream's watches (liveType), in
// memory each push touches anyway; StreamStatus lists them for readers.
// Whoever keeps it keeps the stream's watches alive: let it go when the
// stream ends (StreamClosed).
type StreamStatus struct {
	// opened is set before the stream's StreamOpened, then read-only.
	opened time.Time
	// group is the stream's group's name, nil for none.
	group atomic.Pointer[string]
	mu    sync.Mutex
	// types are the records, in the order the stream first wrote them: a
	// stream has a few, read by scanning.
	types []*liveType
}

// liveType is one watch's status record, what status.Stamps shows of a
// type. Compact, as every watch of every stream has one: times in nanoseconds since 1970 (zero: none), the
// versions and nonces shared with the responses.
type liveType struct {
	mu sync.Mutex
	// url is set once, before the record is listed (StreamStatus.types).
	url                         string
	expected                    string
	sentVersion, sentNonce      string
	ackedVersion, ackedNonce    string
	sentAt, ackedAt, ackedSince int64
	// nackAt is the latest NACK's time: a type NACKed after its latest
	// ACK is not synced, whatever the versions say.
	nackAt   int64
	lastSent []proto.Message
	// more is what few records have: nil until then.
	more *liveMore
	// The counts (status.Stamps).
	bytes                          uint64
	sentResources, responses, acks uint32
	// synced is set once the type was synced: its first sync is timed
	// once.
	synced bool
}

// liveMore is what few of a stream's types have: set versions apart from
// their versions (a subscription to part of a set, X24) and removals
// (delta).
type liveMore struct {
	expectedSet, sentSet, ackedSet string
	lastRemoved                    []string
}

// moreOf returns t's liveMore, made if need be.
func (t *liveType) moreOf() *liveMore {
	if t.more == nil {
		t.more = &liveMore{}
	}
	return t.more
}

// Group is the stream's node group now ("" for none).
func (l *StreamStatus) Group() string {
	if g := l.group.Load(); g != nil {
		return *g
	}
	return ""
}

// Stamps fills *into with the stream's state of typeURL and reports
// whether the stream has any (once the type was first expected, sent or
// answered): status.Live.
func (l *StreamStatus) Stamps(typeURL string, into *status.Stamps) bool {
	l.mu.Lock()
	var t *liveType
	for _, r := range l.types {
		if r.url == typeURL {
			t = r
			break
		}
	}
	l.mu.Unlock()
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var m liveMore
	if t.more != nil {
		m = *t.more
	}
	*into = status.Stamps{
		Expected: t.expected, ExpectedSet: m.expectedSet,
		Sent:       status.Stamp{Version: t.sentVersion, Nonce: t.sentNonce, Set: m.sentSet, At: unixTime(t.sentAt), Resources: int(t.sentResources)},
		ACKed:      status.Stamp{Version: t.ackedVersion, Nonce: t.ackedNonce, Set: m.ackedSet, At: unixTime(t.ackedAt)},
		ACKedSince: unixTime(t.ackedSince), LastSent: t.lastSent, LastRemoved: m.lastRemoved,
		Responses: uint64(t.responses), ResponseBytes: t.bytes, ACKs: uint64(t.acks),
	}
	return true
}

// unixTime is ns nanoseconds since 1970 as a time, zero for 0.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// update runs f on t, the record of typeURL, under t's lock, listing it
// first if need be; nothing on a nil StreamStatus (a server without an
// observer). When that makes the type synced for the first time,
// it returns the time from the stream's open to now (zero otherwise), for
// the event that made it so (Event.FirstSync).
func (l *StreamStatus) update(t *liveType, typeURL string, now time.Time, f func(*liveType)) time.Duration {
	if l == nil {
		return 0
	}
	if t.url == "" {
		t.url = typeURL
		l.mu.Lock()
		l.types = append(l.types, t)
		l.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
	if now.IsZero() {
		return 0 // a write that cannot make the type synced
	}
	return l.firstSync(t, now)
}

// firstSync marks t synced if it is now for the first time, and returns
// the time since the stream opened then (zero otherwise). Call with t
// locked.
func (l *StreamStatus) firstSync(t *liveType, now time.Time) time.Duration {
	if t.synced || l.group.Load() == nil || !t.isSynced() {
		return 0
	}
	t.synced = true
	return max(now.Sub(l.opened), time.Nanosecond)
}

// regrouped returns, per type, the first syncs a change of the stream's
// group brought (a type ACKed while the stream was in no group is synced
// once it is in one again), for the stream to report.
func (l *StreamStatus) regrouped(now time.Time) []firstSync {
	if l == nil || l.group.Load() == nil {
		return nil
	}
	l.mu.Lock()
	types := slices.Clone(l.types)
	l.mu.Unlock()
	var out []firstSync
	for _, t := range types {
		t.mu.Lock()
		if d := l.firstSync(t, now); d > 0 {
			out = append(out, firstSync{t.url, d})
		}
		t.mu.Unlock()
	}
	return out
}

type firstSync struct {
	url string
	d   time.Duration
}

// isSynced is status's SYNCED: what was sent last is what was ACKed, and
// is what the client should hold, with no rejection since.
func (t *liveType) isSynced() bool {
	return t.sentAt != 0 && t.ackedAt != 0 && t.expected != "" &&
		t.ackedVersion == t.expected && t.ackedVersion == t.sentVersion && t.nackAt <= t.ackedAt
}

// setGroup records the stream's group (nil for none).
func (l *StreamStatus) setGroup(g *fleet.Group) {
	if l == nil {
		return
	}
	if g == nil {
		l.group.Store(nil)
		return
	}
	// The name's own copy: a pointer into g would keep g's whole
	// snapshot alive for as long as the stream stays in the group.
	name := g.Name
	l.group.Store(&name)
}

// expected records what the client should hold of the type.
func (l *StreamStatus) expected(t *liveType, typeURL, version, set string, now time.Time) time.Duration {
	if version == "" || set == version {
		set = ""
	}
	return l.update(t, typeURL, now, func(t *liveType) {
		t.expected = version
		if set != "" || t.more != nil {
			t.moreOf().expectedSet = set
		}
	})
}

// sent records a response of size bytes (not a heartbeat) or, with
// spared, a response the client already held (X24), which counts as
// ACKed too.
func (l *StreamStatus) sent(t *liveType, typeURL string, st status.Stamp, size int, sent []proto.Message, removed []string, spared bool) time.Duration {
	if st.Set == st.Version {
		st.Set = ""
	}
	return l.update(t, typeURL, st.At, func(t *liveType) {
		if !spared {
			t.responses++
			t.bytes += uint64(size)
		}
		t.sentVersion, t.sentNonce, t.sentAt = st.Version, st.Nonce, st.At.UnixNano()
		t.sentResources, t.lastSent = uint32(min(max(st.Resources, 0), math.MaxInt32)), sent
		if st.Set != "" || removed != nil || t.more != nil {
			m := t.moreOf()
			m.sentSet, m.lastRemoved = st.Set, removed
		}
		if spared {
			t.acked(status.Stamp{Version: st.Version, Set: st.Set, At: st.At})
		}
	})
}

// acked records an ACK of st. took reports whether it is the stream's
// first ACK of st.Version.
func (l *StreamStatus) acked(t *liveType, typeURL string, st status.Stamp) (first time.Duration, took bool) {
	if st.Set == st.Version {
		st.Set = ""
	}
	first = l.update(t, typeURL, st.At, func(t *liveType) {
		t.acks++
		took = t.acked(st)
	})
	return first, took
}

func (t *liveType) acked(st status.Stamp) (took bool) {
	// The versions and nonces ACKed are the client's strings: the equal
	// ones already kept are kept instead.
	switch st.Version {
	case t.sentVersion:
		st.Version = t.sentVersion
	case t.ackedVersion:
		st.Version = t.ackedVersion
	}
	if st.Nonce == t.sentNonce {
		st.Nonce = t.sentNonce
	}
	if t.more != nil && st.Set == t.more.ackedSet {
		st.Set = t.more.ackedSet
	}
	at := st.At.UnixNano()
	took = t.ackedAt == 0 || t.ackedVersion != st.Version
	if took {
		t.ackedSince = at
	}
	t.ackedVersion, t.ackedNonce, t.ackedAt = st.Version, st.Nonce, at
	if st.Set != "" || t.more != nil {
		t.moreOf().ackedSet = st.Set
	}
	return took
}

// heartbeat counts a heartbeat of size bytes, which changes nothing else.
func (l *StreamStatus) heartbeat(t *liveType, typeURL string, size int) {
	l.update(t, typeURL, time.Time{}, func(t *liveType) {
		t.responses++
		t.bytes += uint64(size)
	})
}

// nacked records a rejection at at.
func (l *StreamStatus) nacked(t *liveType, typeURL string, at time.Time) {
	l.update(t, typeURL, time.Time{}, func(t *liveType) { t.nackAt = at.UnixNano() })
}

// ackEvent records and reports an ACK of version (planned from set, ""
// for version itself) by the response nonce named.
func (st *stream) ackEvent(t *liveType, typeURL, version, set, nonce string) {
	// A state-of-the-world ACK's version and nonce are the client's.
	version, nonce = bounded(version, maxLogged), bounded(nonce, maxLogged)
	now := time.Now()
	first, took := st.live.acked(t, typeURL, status.Stamp{Version: version, Set: set, Nonce: nonce, At: now})
	if st.wants(status.RequestACK) {
		st.observe(&status.Event{Kind: status.RequestACK, TypeURL: typeURL, Version: version, SetVersion: set, Nonce: nonce, At: now})
	}
	if took && st.wants(status.VersionTaken) {
		st.observe(&status.Event{Kind: status.VersionTaken, TypeURL: typeURL, Version: version, SetVersion: set, At: now, Opened: st.opened})
	}
	st.synced(typeURL, first, now)
}

// synced reports TypeSynced when first, from the stream's status, says the
// type was just synced for the first time.
func (st *stream) synced(typeURL string, first time.Duration, now time.Time) {
	if first > 0 {
		st.observe(&status.Event{Kind: status.TypeSynced, TypeURL: typeURL, FirstSync: first, At: now})
	}
}

// wants reports whether the observer wants an event of kind k now
// (Selective).
func (st *stream) wants(k status.EventKind) bool {
	return st.srv.sel == nil || st.srv.sel.Wants(k)
}
