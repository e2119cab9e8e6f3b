package admin

import (
	"sort"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/status"
)

// proxyEntry is a stream of /proxies: the tracker's, or another replica's
// summary of one (no stream id, address, client or what was last sent:
// those stay on the replica serving it), with the replica serving it.
type proxyEntry struct {
	Replica string `json:"replica"`
	// Shard is the node groups that replica serves (--groups), when it
	// serves some only.
	Shard string `json:"shard,omitempty"`
	// Remote is set on another replica's stream: the fields it does not
	// publish are zero here because they are not known, not because they
	// are zero.
	Remote bool `json:"remote,omitempty"`
	// Stale is set on another replica's stream when etcd could not be
	// read: its state is as of AsOf, AgeSeconds ago by this replica's
	// clock (a reader need not trust its own), and may no longer hold.
	Stale      bool      `json:"stale,omitempty"`
	AsOf       time.Time `json:"asOf,omitzero"`
	AgeSeconds float64   `json:"ageSeconds,omitempty"`
	status.Stream
}

// Unknown is the dashboard's state of another replica's stream while etcd
// cannot be read (proxyEntry.Stale), where its last state read would
// otherwise count as current.
const Unknown = "UNKNOWN"

// proxiesBody is the JSON of /proxies and /proxies/{id}. Partial says why
// the other replicas' proxies may be missing or out of date.
type proxiesBody struct {
	Streams any    `json:"streams"`
	Partial string `json:"partial,omitempty"`
	// Relays are the relays' reports of the proxies behind them: counts
	// per key, apart from the streams this server serves.
	Relays []RelayReport `json:"relays,omitempty"`
}

// proxies merges this replica's streams (fresh, redacted) with the other
// replicas' (redacted when published), all of them or node's only.
func (o Options) proxies(node string) ([]proxyEntry, string) {
	out := []proxyEntry{}
	for _, s := range scrubStreams(o.Proxies.Streams()) {
		if node == "" || s.Node == node {
			out = append(out, proxyEntry{Replica: o.Identifier, Shard: o.Shard, Stream: s})
		}
	}
	if o.Fleet == nil {
		return out, ""
	}
	remote, partial := o.Fleet.Remote()
	var streams []status.Stream
	var from []fleetstatus.Remote
	for _, r := range remote {
		if node == "" || r.Node == node {
			streams = append(streams, r.Stream())
			from = append(from, r)
		}
	}
	// Published redacted; scrubbed again: etcd is shared, and what
	// another writer put there is read here.
	now := time.Now()
	for i, s := range scrubStreams(streams) {
		e := proxyEntry{Replica: from[i].Replica, Shard: strings.Join(from[i].Groups, ","), Remote: true, Stream: s}
		if from[i].Stale {
			e.Stale, e.AsOf = true, from[i].ReadAt
			e.AgeSeconds = now.Sub(from[i].ReadAt).Round(time.Second).Seconds()
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, partial
}
