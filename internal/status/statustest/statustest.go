// Package statustest feeds a status.Tracker streams as the xds server's
// are: live (status.Live), each keeping its own stamps of what it sent,
// what its client ACKed and what it should hold, which the tracker reads
// when asked. Tests of what reads the tracker (metrics, pages, latency)
// say what happened on a stream through a Feed, in the words the server
// would have used.
package statustest

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
)

// Stream is one live stream's status: a status.Live.
type Stream struct {
	mu     sync.Mutex
	group  string
	stamps map[string]status.Stamps
}

// Group is the stream's group ("" for none).
func (s *Stream) Group() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group
}

// Stamps fills *into with the stream's stamps of typeURL.
func (s *Stream) Stamps(typeURL string, into *status.Stamps) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.stamps[typeURL]
	*into = p
	return ok
}

// NewStream is a stream of group with no stamps yet, for a test that
// attaches it itself and sets its stamps whole (Set).
func NewStream(group string) *Stream {
	return &Stream{group: group, stamps: map[string]status.Stamps{}}
}

// Set replaces the stream's stamps of typeURL.
func (s *Stream) Set(typeURL string, p status.Stamps) {
	s.update(typeURL, func(q *status.Stamps) { *q = p })
}

// SetGroup moves the stream to group, as a stream's node moves.
func (s *Stream) SetGroup(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.group = group
}

// update runs f on the stamps of typeURL.
func (s *Stream) update(typeURL string, f func(p *status.Stamps)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.stamps[typeURL]
	f(&p)
	s.stamps[typeURL] = p
}

// Feed feeds a tracker's live streams. Safe for use by several goroutines
// at once.
type Feed struct {
	T       *status.Tracker
	mu      sync.Mutex
	streams map[uint64]*Stream
}

// New returns a Feed of t.
func New(t *status.Tracker) *Feed {
	return &Feed{T: t, streams: map[uint64]*Stream{}}
}

// Stream returns stream id, attached to the tracker at at (as its
// StreamOpened attaches it) when first asked for.
func (f *Feed) Stream(id uint64, who status.Who, at time.Time) *Stream {
	f.mu.Lock()
	s := f.streams[id]
	if s == nil {
		s = NewStream("")
		f.streams[id] = s
	}
	f.mu.Unlock()
	f.T.Attach(id, who, s, at)
	return s
}

// Seen says stream id is open and in group ("" for none).
func (f *Feed) Seen(id uint64, who status.Who, group string, at time.Time) {
	f.T.Seen(id, who, group, at)
	f.Stream(id, who, at).SetGroup(group)
}

// typ returns stream id, with an entry of typeURL in the tracker.
func (f *Feed) typ(id uint64, who status.Who, typeURL string, at time.Time) *Stream {
	s := f.Stream(id, who, at)
	f.T.Requested(id, who, typeURL, at)
	return s
}

// Sent says stream id sent a response st of size bytes, which carried
// sent and removed removed.
func (f *Feed) Sent(id uint64, who status.Who, typeURL string, st status.Stamp, size int, sent []proto.Message, removed []string) {
	f.typ(id, who, typeURL, st.At).update(typeURL, func(p *status.Stamps) {
		sentTo(p, st, sent, removed)
		p.Responses++
		p.ResponseBytes += uint64(max(size, 0))
	})
}

// Spared says a reconnecting client of stream id already held st, so
// nothing was sent (X24): sent and ACKed at st, nothing counted.
func (f *Feed) Spared(id uint64, who status.Who, typeURL string, st status.Stamp, held []proto.Message) {
	f.typ(id, who, typeURL, st.At).update(typeURL, func(p *status.Stamps) {
		sentTo(p, st, held, nil)
		ack(p, status.Stamp{Version: st.Version, Set: st.Set, At: st.At})
	})
}

// ACKed says stream id's client ACKed st. Its push latency is measured
// when the tracker harvests (status.Tracker.Harvest, which a read of the
// latencies does).
func (f *Feed) ACKed(id uint64, who status.Who, typeURL string, st status.Stamp) {
	f.typ(id, who, typeURL, st.At).update(typeURL, func(p *status.Stamps) {
		ack(p, st)
		p.ACKs++
	})
}

// Expect says stream id should hold version of typeURL rather than its
// group's ("": its group's again).
func (f *Feed) Expect(id uint64, who status.Who, typeURL, version string, at time.Time) {
	f.ExpectOf(id, who, typeURL, version, "", at)
}

// ExpectOf is Expect where version is the stream's own, planned from set,
// the version of the group's whole set (X24).
func (f *Feed) ExpectOf(id uint64, who status.Who, typeURL, version, set string, at time.Time) {
	if version == "" || set == version {
		set = ""
	}
	f.Stream(id, who, at).update(typeURL, func(p *status.Stamps) {
		p.Expected, p.ExpectedSet = version, set
	})
}

// sentTo records on p a response st that carried sent and removed removed.
func sentTo(p *status.Stamps, st status.Stamp, sent []proto.Message, removed []string) {
	if st.Set == st.Version {
		st.Set = ""
	}
	p.Sent, p.LastSent, p.LastRemoved = st, sent, removed
}

// ack records on p an ACK of st: ACKedSince moves on the first ACK of a
// version, as a stream keeps it.
func ack(p *status.Stamps, st status.Stamp) {
	if st.Set == st.Version {
		st.Set = ""
	}
	if p.ACKed.At.IsZero() || p.ACKed.Version != st.Version {
		p.ACKedSince = st.At
	}
	p.ACKed = st
}
