package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// syncWatch follows, inside a Pylon server process, when each proxy is
// SYNCED: every type it subscribes to ACKed at the version the server
// expects it to hold. That is the status tracker's rule (ACKed = last sent
// = expected, the expected version being the stream's own or else its
// group's), with a response spared under X24 counted as sent and ACKed, as
// the xds package defines ResponseSpared. The tracker has no per-stream
// query cheap enough to poll, hence this copy of the rule; the report
// includes the tracker's own counts, so the two can be compared. It also
// counts, per type, what the server sent (and spared) since the last mark.
type syncWatch struct {
	next  status.Observer
	types int // the types a proxy subscribes to
	// group is the version a group's snapshot has of a type.
	group func(group, typeURL string) string
	// states is the status tracker's count of types by state.
	states func() map[string]int

	mu      sync.Mutex
	streams map[uint64]*watchedStream
	synced  map[string]time.Time // node -> first time SYNCED since the mark
	// took holds, per node, the time from its stream's first event to
	// that SYNCED: the server's part, without the client's backoff.
	took   map[string]time.Duration
	sent   map[string]*sentCount
	notify chan struct{} // one slot: a node became SYNCED
}

type watchedStream struct {
	node, group string
	since       time.Time // the stream's first event
	types       map[string]*watchedType
	done        bool // recorded as SYNCED since the mark
}

type watchedType struct{ sent, acked, expected string }

// sentCount is what the server sent of a type; Spared* is what the
// responses it spared would have carried.
type sentCount struct {
	Responses, Resources, Bytes                   int64
	SparedResponses, SparedResources, SparedBytes int64
}

func newSyncWatch(next status.Observer, types int, group func(string, string) string, states func() map[string]int) *syncWatch {
	return &syncWatch{
		next: next, types: types, group: group, states: states,
		streams: map[uint64]*watchedStream{}, synced: map[string]time.Time{}, took: map[string]time.Duration{}, sent: map[string]*sentCount{},
		notify: make(chan struct{}, 1),
	}
}

func (w *syncWatch) Observe(e *status.Event) {
	w.next.Observe(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.Kind == status.StreamClosed {
		delete(w.streams, e.StreamID)
		return
	}
	s := w.streams[e.StreamID]
	if s == nil {
		s = &watchedStream{node: e.NodeID(), since: e.At, types: map[string]*watchedType{}}
		w.streams[e.StreamID] = s
	}
	s.group = e.Group
	if s.node == "" {
		s.node = e.NodeID()
	}
	if e.TypeURL == "" {
		return
	}
	t := s.types[e.TypeURL]
	if t == nil {
		t = &watchedType{}
		s.types[e.TypeURL] = t
	}
	w.apply(e, t)
	if !s.done && w.isSynced(s) {
		s.done = true
		if _, ok := w.synced[s.node]; !ok {
			w.synced[s.node], w.took[s.node] = e.At, e.At.Sub(s.since)
			select {
			case w.notify <- struct{}{}:
			default:
			}
		}
	}
}

// apply takes one event into a type's state, and counts what was sent.
func (w *syncWatch) apply(e *status.Event, t *watchedType) {
	c := w.sent[e.TypeURL]
	if c == nil {
		c = &sentCount{}
		w.sent[e.TypeURL] = c
	}
	switch e.Kind {
	case status.ResponseSent:
		c.Responses++
		c.Resources += int64(e.Resources)
		c.Bytes += int64(e.Bytes)
		if !e.Heartbeat {
			t.sent = e.Version
		}
	case status.ResponseSpared:
		c.SparedResponses++
		c.SparedResources += int64(e.Resources)
		c.SparedBytes += int64(e.Bytes)
		t.sent, t.acked = e.Version, e.Version
	case status.RequestACK:
		t.acked = e.Version
	case status.ExpectedVersion:
		t.expected = e.Version
	}
}

func (w *syncWatch) isSynced(s *watchedStream) bool {
	if len(s.types) < w.types {
		return false
	}
	for url, t := range s.types {
		expected := t.expected
		if expected == "" {
			expected = w.group(s.group, url)
		}
		if t.acked == "" || t.acked != t.sent || t.acked != expected {
			return false
		}
	}
	return true
}

// mark starts counting afresh: nothing sent, no proxy SYNCED since.
func (w *syncWatch) mark() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced, w.took, w.sent = map[string]time.Time{}, map[string]time.Duration{}, map[string]*sentCount{}
	for _, s := range w.streams {
		s.done = false
	}
}

// syncReport is what the driver reads back.
type syncReport struct {
	// Synced holds, per node, when it became SYNCED (Unix ns).
	Synced map[string]int64 `json:"synced"`
	// Took holds, per node, the time from its stream's first event on
	// this server to SYNCED (ns).
	Took   map[string]int64      `json:"took"`
	Sent   map[string]*sentCount `json:"sent"`
	States map[string]int        `json:"states"`
}

// wait returns the report once n proxies are SYNCED, or when limit has
// passed (then with fewer).
func (w *syncWatch) wait(n int, limit time.Duration) syncReport {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for w.count() < n {
		select {
		case <-w.notify:
		case <-deadline.C:
			return w.report()
		}
	}
	return w.report()
}

func (w *syncWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.synced)
}

func (w *syncWatch) report() syncReport {
	w.mu.Lock()
	r := syncReport{Synced: make(map[string]int64, len(w.synced)), Took: make(map[string]int64, len(w.took)), Sent: map[string]*sentCount{}}
	for n, at := range w.synced {
		r.Synced[n], r.Took[n] = at.UnixNano(), int64(w.took[n])
	}
	for u, c := range w.sent {
		cc := *c
		r.Sent[u] = &cc
	}
	w.mu.Unlock()
	r.States = w.states()
	return r
}

// handle serves POST /mark and GET /synced?n=N&wait=DURATION on mux.
func (w *syncWatch) handle(mux *http.ServeMux) {
	mux.HandleFunc("POST /mark", func(http.ResponseWriter, *http.Request) { w.mark() })
	mux.HandleFunc("GET /synced", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 {
			http.Error(rw, "synced: n must be a count", http.StatusBadRequest)
			return
		}
		limit, err := time.ParseDuration(r.URL.Query().Get("wait"))
		if err != nil || limit <= 0 || limit > 30*time.Minute {
			http.Error(rw, "synced: wait must be a duration up to 30m", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(rw).Encode(w.wait(n, limit))
	})
}
