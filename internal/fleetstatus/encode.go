// Package fleetstatus shows every replica's proxies on every replica. Each
// replica publishes a compact summary of its open streams (node, cluster,
// group, kind, per type state, versions and the last NACK's reason, never
// a resource or anything a key could be in) to etcd on a lease of its own;
// reads merge this replica's tracker (fresh) with the others' summaries.
// A replica that dies stops renewing its lease: etcd deletes its summary
// and its proxies leave the list, to reappear under the replica they
// reconnect to.
package fleetstatus

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/status"
)

// Bounds of a summary.
const (
	// DefaultMaxProxies is how many streams a replica publishes at most;
	// the rest are counted as left out.
	DefaultMaxProxies = 20000
	// maxText bounds each text a proxy supplied (node id, NACK detail...).
	maxText = 1 << 10
	// maxDecoded bounds one shard once decompressed: a shard is gzip, and
	// a small value must not inflate into an unbounded one.
	maxDecoded = 64 << 20
	// maxTypes bounds the types kept per stream.
	maxTypes = 32
	// format is the encoding's version.
	format = 1
	// MaxGroupPatterns bounds the patterns of --groups a replica publishes.
	MaxGroupPatterns = 256
)

// Proxy is one stream of a proxy, as another replica sees it.
type Proxy struct {
	Node    string    `json:"node"`
	Cluster string    `json:"cluster,omitempty"`
	Group   string    `json:"group"`
	Kind    string    `json:"kind"`
	Since   time.Time `json:"since"`
	Types   []Type    `json:"types"`
}

// Type is a stream's state for one type.
type Type struct {
	Type  string `json:"type"`
	State string `json:"state"`
	Sent  string `json:"sent,omitempty"`
	ACKed string `json:"acked,omitempty"`
	NACK  *NACK  `json:"nack,omitempty"`
}

// NACK is the last rejection of a type, its reason cut to 1 KiB.
type NACK struct {
	Version string    `json:"version"`
	Detail  string    `json:"detail"`
	At      time.Time `json:"at"`
}

// shard is one etcd value: part of a replica's summary. Gen numbers each
// publish, so that a reader keeps only the shards of the newest one (the
// shards are written one by one). Of is how many shards Gen has.
type shard struct {
	Format  int     `json:"format"`
	Gen     uint64  `json:"gen"`
	Of      int     `json:"of"`
	Omitted int     `json:"omitted,omitempty"`
	Proxies []Proxy `json:"proxies"`
	// Relays are the reports of the relays reporting to the replica
	// (relays.go), in shards of their own after the proxies' (a summary
	// of a replica of before has none); RelaysOmitted, in shard 0, how
	// many the bounds left out.
	Relays        []Relay `json:"relays,omitempty"`
	RelaysOmitted int     `json:"relaysOmitted,omitempty"`
	Self
}

// summary is what a replica publishes, whole: its proxies, its relays'
// reports, and what it says of itself.
type summary struct {
	proxies       []Proxy
	omitted       int
	relays        []Relay
	relaysOmitted int
	self          Self
}

// Self is what a replica says of itself in every shard of its summary: the
// node groups it serves (--groups; none: every group) and its xDS address,
// so that another replica can name the shard serving a group.
type Self struct {
	Groups []string `json:"groups,omitempty"`
	XDS    string   `json:"xds,omitempty"`
	// Draining: the replica is handing its proxies over (its graceful
	// stop): the others do not count it among the replicas they balance
	// with, nor name it as a shard.
	Draining bool `json:"draining,omitempty"`
}

// cut bounds a proxy-supplied text, at a rune boundary, after redaction.
func cut(s string) string {
	s = redact.String(s)
	if len(s) <= maxText {
		return s
	}
	s = s[:maxText]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Summarize turns the open streams into proxies, at most max (the rest are
// counted in omitted). Every text is redacted and bounded.
func Summarize(streams []status.Stream, max int) (out []Proxy, omitted int) {
	for _, s := range streams {
		if s.Gone != nil {
			continue
		}
		if len(out) == max {
			omitted++
			continue
		}
		p := Proxy{Node: cut(s.Node), Cluster: cut(s.Cluster), Group: cut(s.Group), Kind: cut(s.Kind), Since: s.Since.UTC()}
		for i, t := range s.Types {
			if i == maxTypes {
				break
			}
			ty := Type{Type: cut(t.Type), State: t.State}
			if t.Sent != nil {
				ty.Sent = cut(t.Sent.Version)
			}
			if t.ACKed != nil {
				ty.ACKed = cut(t.ACKed.Version)
			}
			if n := t.LastNACK; n != nil {
				ty.NACK = &NACK{Version: cut(n.Version), Detail: cut(n.Detail), At: n.At.UTC()}
			}
			p.Types = append(p.Types, ty)
		}
		out = append(out, p)
	}
	return out, omitted
}

// Encode splits proxies into shards of at most maxValue bytes each
// (gzipped JSON), halving a part until it fits. A single proxy is bounded
// by Summarize and fits any sensible maxValue; if not, it is an error.
func Encode(gen uint64, self Self, proxies []Proxy, omitted, maxValue int) ([][]byte, error) {
	return encodeSummary(gen, self, summary{proxies: proxies, omitted: omitted}, maxValue)
}

// encodeSummary is Encode of a whole summary: the proxies' shards, then
// the relays' (none without reports).
func encodeSummary(gen uint64, self Self, sum summary, maxValue int) ([][]byte, error) {
	parts, err := split(self, sum.proxies, maxValue)
	if err != nil {
		return nil, err
	}
	var relayParts [][]Relay
	if len(sum.relays) > 0 {
		if relayParts, err = splitRelays(self, sum.relays, maxValue); err != nil {
			return nil, err
		}
	}
	of := len(parts) + len(relayParts)
	out := make([][]byte, 0, of)
	for i := range of {
		sh := shard{Format: format, Gen: gen, Of: of, Self: self}
		if i < len(parts) {
			sh.Proxies = parts[i]
		} else {
			sh.Proxies, sh.Relays = []Proxy{}, relayParts[i-len(parts)]
		}
		if i == 0 {
			sh.Omitted, sh.RelaysOmitted = sum.omitted, sum.relaysOmitted
		}
		b, err := compress(sh)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// split cuts proxies into parts whose encoding fits maxValue. It encodes
// each part to measure it; the recursion halves, so it is O(n log n).
func split(self Self, proxies []Proxy, maxValue int) ([][]Proxy, error) {
	b, err := compress(shard{Format: format, Gen: ^uint64(0), Of: 1 << 20, Omitted: 1 << 30, Proxies: proxies, Self: self})
	if err != nil {
		return nil, err
	}
	if len(b) <= maxValue {
		return [][]Proxy{proxies}, nil
	}
	if len(proxies) <= 1 {
		return nil, fmt.Errorf("fleet status: one proxy's summary is %d bytes, more than %d", len(b), maxValue)
	}
	h := len(proxies) / 2
	a, err := split(self, proxies[:h], maxValue)
	if err != nil {
		return nil, err
	}
	c, err := split(self, proxies[h:], maxValue)
	return append(a, c...), err
}

func compress(sh shard) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(sh); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decode reads one shard, refusing one that inflates past maxDecoded or
// holds more proxies than a replica may publish.
func decode(b []byte) (shard, error) {
	var sh shard
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return sh, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return sh, err
	}
	if len(raw) > maxDecoded {
		return sh, fmt.Errorf("more than %d bytes decompressed", maxDecoded)
	}
	if err := json.Unmarshal(raw, &sh); err != nil {
		return sh, err
	}
	switch {
	case sh.Format != format:
		return sh, fmt.Errorf("format %d, this Pylon reads %d", sh.Format, format)
	case len(sh.Proxies) > DefaultMaxProxies:
		return sh, fmt.Errorf("%d proxies, at most %d", len(sh.Proxies), DefaultMaxProxies)
	case len(sh.Groups) > MaxGroupPatterns:
		return sh, fmt.Errorf("%d group patterns, at most %d", len(sh.Groups), MaxGroupPatterns)
	}
	if err := checkRelays(sh.Relays); err != nil {
		return sh, err
	}
	for i, g := range sh.Groups {
		sh.Groups[i] = cut(g)
	}
	sh.XDS = cut(sh.XDS)
	return sh, nil
}

// errIncomplete says a replica's newest summary was being written.
var errIncomplete = errors.New("its summary is being rewritten: some of its proxies may be missing for a moment")

// Decode reads a replica's shards: the proxies of the newest generation
// and how many that replica left out. An undecodable shard is an error
// that names it; the proxies of the others are still returned.
func Decode(shards [][]byte) (proxies []Proxy, omitted int, err error) {
	sum, err := decodeAll(shards)
	return sum.proxies, sum.omitted, err
}

// decodeAll is Decode of the whole summary: also the relays' reports and
// what the replica says of itself (in its newest generation).
func decodeAll(shards [][]byte) (sum summary, err error) {
	decoded := make([]shard, 0, len(shards))
	var errs []error
	var newest uint64
	for i, b := range shards {
		sh, e := decode(b)
		if e != nil {
			errs = append(errs, fmt.Errorf("value %d: %w", i, e))
			continue
		}
		decoded = append(decoded, sh)
		newest = max(newest, sh.Gen)
	}
	n, of := 0, 0
	for _, sh := range decoded {
		if sh.Gen != newest {
			continue
		}
		n, of, sum.self = n+1, sh.Of, sh.Self
		sum.omitted += sh.Omitted
		sum.relaysOmitted += sh.RelaysOmitted
		sum.proxies = append(sum.proxies, sh.Proxies...)
		sum.relays = append(sum.relays, sh.Relays...)
	}
	if n != of && len(errs) == 0 {
		errs = append(errs, errIncomplete)
	}
	// Each shard is bounded; the joined whole is held to one replica's
	// bounds too (another writer's shards could add up past them).
	sum.relays = joinRelays(sum.relays)
	if kept, over := boundRelays(sum.relays); over > 0 {
		sum.relays, sum.relaysOmitted = kept, sum.relaysOmitted+over
	}
	return sum, errors.Join(errs...)
}

// Stream is p as the tracker's stream type, for the admin API's lists.
func (p Proxy) Stream() status.Stream {
	s := status.Stream{Node: p.Node, Cluster: p.Cluster, Group: p.Group, Kind: p.Kind, Since: p.Since}
	for _, t := range p.Types {
		ty := &status.Type{Type: t.Type, State: t.State}
		if t.Sent != "" {
			ty.Sent = &status.Stamp{Version: t.Sent}
		}
		if t.ACKed != "" {
			ty.ACKed = &status.Stamp{Version: t.ACKed}
		}
		if t.NACK != nil {
			ty.LastNACK = &status.NACK{Version: t.NACK.Version, Detail: t.NACK.Detail, At: t.NACK.At}
		}
		s.Types = append(s.Types, ty)
	}
	return s
}
