package xds

import (
	"fmt"
	"maps"
	"sync"

	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
)

// board lets the per-type streams of one node coordinate make-before-break:
// a node's CDS stream publishes what its client has ACKed, and the node's
// RDS stream holds a route until the clusters it names are there. Streams
// on ADS need none of this: one stream sees every type.
//
// What is guaranteed: between per-type streams of the same node id on the
// same Pylon replica. Not across replicas, and not for node ids shared by
// several proxies (each would see the others' ACKs).
type board struct {
	mu    sync.Mutex
	nodes map[string]*nodeEntry
}

type nodeEntry struct {
	streams int
	views   map[string]*view // by type URL, published by per-type streams
	kicks   map[*wakeups]struct{}
}

// view is a frozen copy of one type's ledger and subscription on a node's
// per-type stream, readable from other streams' goroutines.
type view struct {
	protocol.Ledger
	wildcard bool
	names    map[string]struct{}
}

func (v *view) Book() *protocol.Ledger { return &v.Ledger }

func (v *view) Covers(name string) bool {
	_, ok := v.names[name]
	return ok || v.wildcard
}

// nodeBoardKey is the board entry of a node's per-type streams: its id
// (length-prefixed) and everything its verified certificate proves
// (identityKey). A client without the certificate of another cannot join that node's
// streams by claiming its id.
//
// Streams without a verified certificate share one entry per node id: an
// uncertified client claiming another uncertified node's id joins its
// board and can feed its make-before-break false holdings (a route sent
// before its cluster arrived, or held until HoldTimeout). That is kept on
// purpose: per-type streams (gRPC's and Envoy's non-ADS modes) need the
// board for make-before-break at all, and a deployment without client
// certificates has already let anyone claim any node id and receive its
// config; requiring certificates (the identity rule) is what closes both.
func nodeBoardKey(id string, ident identity.Identity) string {
	return fmt.Sprintf("%d:%s", len(id), id) + identityKey(ident)
}

func newBoard() *board { return &board{nodes: map[string]*nodeEntry{}} }

// join registers a per-type stream of node id; kick is woken when another
// stream of the node publishes. The returned func leaves.
func (b *board) join(id string, kick *wakeups) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.nodes[id]
	if e == nil {
		e = &nodeEntry{views: map[string]*view{}, kicks: map[*wakeups]struct{}{}}
		b.nodes[id] = e
	}
	e.streams++
	e.kicks[kick] = struct{}{}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		e.streams--
		delete(e.kicks, kick)
		if e.streams == 0 {
			delete(b.nodes, id)
		}
	}
}

// publish replaces the node's view of typeURL and wakes its other streams.
func (b *board) publish(id, typeURL string, v *view, self *wakeups) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.nodes[id]
	if e == nil {
		return
	}
	e.views[typeURL] = v
	for k := range e.kicks {
		if k == self {
			continue
		}
		k.post(wakeKick)
	}
}

// lookup returns the node's published view of typeURL, or nil.
func (b *board) lookup(id, typeURL string) *view {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.nodes[id]; e != nil {
		return e.views[typeURL]
	}
	return nil
}

// freeze copies a ledger and subscription into a view. Shared maps are
// immutable and need no copy.
func freeze(l *protocol.Ledger, wildcard bool, names map[string]struct{}) *view {
	held, acked := l.Held, l.Acked
	if l.HeldAs == nil {
		held = maps.Clone(held)
	}
	if l.AckedAs == nil {
		acked = maps.Clone(acked)
	}
	return &view{
		Ledger: protocol.Ledger{
			Held:    held,
			Acked:   acked,
			Nacked:  maps.Clone(l.Nacked),
			Moving:  l.Moving.Clone(),
			Synced:  l.Synced,
			HeldAs:  l.HeldAs,
			AckedAs: l.AckedAs,
		},
		wildcard: wildcard,
		names:    maps.Clone(names),
	}
}
