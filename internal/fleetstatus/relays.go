package fleetstatus

import (
	"fmt"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
)

// Bounds of the relays' reports a replica publishes.
const (
	// MaxRelays is how many relays' reports a summary holds at most (the
	// admin API keeps as many).
	MaxRelays = 1000
	// MaxRelayKeysPerReport is how many keys one report holds at most (the
	// admin API takes no more in a report).
	MaxRelayKeysPerReport = 2000
	// MaxRelayKeys is how many keys a replica publishes in all, over its
	// relays' reports: the reports past it are counted, not published.
	MaxRelayKeys = 20000
	// MaxRelayBytes bounds the texts (names, keys, versions) of the
	// reports a replica publishes, with relayKeyBytes a key for its
	// counts: a relay token's holder choosing kilobyte keys would
	// otherwise have every replica write tens of megabytes to etcd.
	MaxRelayBytes = 2 << 20
	relayKeyBytes = 64
)

// relayBytes is what r adds to a summary, about (relayKeyBytes a key for
// its counts and the encoding's framing).
func relayBytes(r Relay) int {
	n := len(r.Relay) + len(r.Identity) + relayKeyBytes
	for _, k := range r.Keys {
		n += len(k.Key) + len(k.Version) + relayKeyBytes
	}
	return n
}

// untimed is relays with their report times left out: what says whether
// the summary changed (relaysRefresh).
func untimed(relays []Relay) []Relay {
	if len(relays) == 0 {
		return nil
	}
	out := make([]Relay, len(relays))
	for i, r := range relays {
		r.ReportedAt = time.Time{}
		out[i] = r
	}
	return out
}

// RelayKey is one key of a relay's report (status.RelayKey).
type RelayKey = status.RelayKey

// Relay is a relay's last report to a replica (POST /v1/relays/{id}):
// what the relay said, with the relay token, not a proof; Identity is
// what its verified client certificate proved to that replica.
type Relay struct {
	Relay      string     `json:"relay"`
	Identity   string     `json:"identity,omitempty"`
	ReportedAt time.Time  `json:"reportedAt"`
	Keys       []RelayKey `json:"keys"`
}

// RemoteRelay is a relay's report held by another replica.
type RemoteRelay struct {
	// Replica is the replica the relay reports to.
	Replica string
	Relay
	// ReadAt is when that replica's summary was read; Stale, that the
	// last read failed, so the report is as of ReadAt.
	ReadAt time.Time
	Stale  bool
}

// boundRelays is what a replica publishes of relays: whole reports, in
// order, while their keys add up to MaxRelayKeys and their texts to
// MaxRelayBytes, and at most MaxRelays; the rest are counted in omitted.
func boundRelays(relays []Relay) (kept []Relay, omitted int) {
	keys, size := 0, 0
	for _, r := range relays {
		n := relayBytes(r)
		if len(kept) == MaxRelays || len(r.Keys) > MaxRelayKeysPerReport || keys+len(r.Keys) > MaxRelayKeys || size+n > MaxRelayBytes {
			omitted++
			continue
		}
		keys, size = keys+len(r.Keys), size+n
		kept = append(kept, r)
	}
	return kept, omitted
}

func countKeys(relays []Relay) int {
	n := 0
	for _, r := range relays {
		n += len(r.Keys)
	}
	return n
}

// checkRelays refuses a shard's relays past a replica's bounds, and cuts
// what it keeps: etcd is shared, and another writer's values are read
// here.
func checkRelays(relays []Relay) error {
	if len(relays) > MaxRelays {
		return fmt.Errorf("%d relays' reports, at most %d", len(relays), MaxRelays)
	}
	for i := range relays {
		r := &relays[i]
		if len(r.Keys) > MaxRelayKeysPerReport {
			return fmt.Errorf("a relay's report of %d keys, at most %d", len(r.Keys), MaxRelayKeysPerReport)
		}
		r.Relay, r.Identity = cut(r.Relay), cut(r.Identity)
		for j := range r.Keys {
			k := &r.Keys[j]
			k.Key, k.Version = cut(k.Key), cut(k.Version)
			k.Proxies, k.ACKed, k.NACKed, k.Pending = max(k.Proxies, 0), max(k.ACKed, 0), max(k.NACKed, 0), max(k.Pending, 0)
		}
	}
	return nil
}

// splitRelays cuts relays into parts whose encoding fits maxValue, as
// split does proxies.
func splitRelays(self Self, relays []Relay, maxValue int) ([][]Relay, error) {
	b, err := compress(shard{Format: format, Gen: ^uint64(0), Of: 1 << 20, Omitted: 1 << 30, RelaysOmitted: 1 << 30, Relays: relays, Self: self})
	if err != nil {
		return nil, err
	}
	if len(b) <= maxValue {
		return [][]Relay{relays}, nil
	}
	if len(relays) == 1 {
		// A report bigger than a value goes in parts, each with some of
		// its keys; the reader joins them (joinRelays).
		r := relays[0]
		if len(r.Keys) <= 1 {
			return nil, fmt.Errorf("fleet status: one key of a relay's report is %d bytes, more than %d", len(b), maxValue)
		}
		h := len(r.Keys) / 2
		first, second := r, r
		first.Keys, second.Keys = r.Keys[:h], r.Keys[h:]
		relays = []Relay{first, second}
	}
	h := len(relays) / 2
	a, err := splitRelays(self, relays[:h], maxValue)
	if err != nil {
		return nil, err
	}
	c, err := splitRelays(self, relays[h:], maxValue)
	return append(a, c...), err
}

// joinRelays joins the parts of a report that was published in several
// (splitRelays), keeping the reports' order.
func joinRelays(relays []Relay) []Relay {
	var out []Relay
	at := map[string]int{}
	for _, r := range relays {
		if i, ok := at[r.Relay]; ok {
			out[i].Keys = append(out[i].Keys, r.Keys...)
			continue
		}
		at[r.Relay] = len(out)
		out = append(out, r)
	}
	return out
}
