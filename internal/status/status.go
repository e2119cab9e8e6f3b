// Package status tracks the proxies connected to this Pylon: who they are,
// how they connect, and which group they are in. It is a leaf: fed plain
// values, it imports nothing of Pylon's.
package status

import (
	"sort"
	"sync"
	"time"
)

// NoGroup is what a proxy in no group shows: it receives nothing.
const NoGroup = "no matching group"

// Stream is one connected xDS stream.
type Stream struct {
	ID      uint64    `json:"stream"`
	Node    string    `json:"node"`
	Cluster string    `json:"cluster,omitempty"`
	Group   string    `json:"group"`
	Kind    string    `json:"kind"` // "ADS", "ADS delta", "CDS", "CDS delta", ...
	Since   time.Time `json:"connectedSince"`
}

// Tracker holds the connected streams. Its memory is bounded by the number
// of open streams: a stream is forgotten when it closes.
type Tracker struct {
	mu      sync.Mutex
	streams map[uint64]*Stream
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{streams: map[uint64]*Stream{}} }

// Seen records that stream id of node is open, in group ("" for none).
func (t *Tracker) Seen(id uint64, node, cluster, kind, group string, at time.Time) {
	if group == "" {
		group = NoGroup
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		s = &Stream{ID: id, Node: node, Cluster: cluster, Kind: kind, Since: at}
		t.streams[id] = s
	}
	s.Group = group
}

// Closed forgets stream id.
func (t *Tracker) Closed(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.streams, id)
}

// Streams returns the open streams, by node then stream.
func (t *Tracker) Streams() []Stream {
	t.mu.Lock()
	out := make([]Stream, 0, len(t.streams))
	for _, s := range t.streams {
		out = append(out, *s)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].ID < out[j].ID
	})
	return out
}
