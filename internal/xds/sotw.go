package xds

import (
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// wildcardName is the explicit wildcard subscription.
const wildcardName = "*"

// watch is one stream's state for one resource type: what the client
// subscribed to, what it holds from this stream, and whether a response is
// owed. It is a plain value owned by the stream's loop; nothing here touches
// gRPC. Its size is proportional to the names the client subscribed to.
type watch struct {
	typ *xdstype.Type

	started        bool // a request for the type has been processed
	wildcard       bool
	legacyWildcard bool // wildcard by an empty first request, not by "*"
	// names maps each explicitly subscribed name (never "*") to the version
	// of it the client holds from this stream, "" if none.
	names  map[string]string
	sorted []string // the keys of names, sorted
	// wildcardVersion is the set version last sent under a wildcard.
	wildcardVersion string

	nonce   string // latest nonce sent for the type; "" before the first response
	version string // version_info of the latest response
	sent    bool

	// warm is set on ADS when a response of the type this one warms (CDS for
	// EDS, LDS for RDS) was sent: Envoy finishes warming only on a fresh
	// response, so the next request is answered even if nothing changed.
	warm bool
}

// requestKind says what a request meant for its type.
type requestKind int

const (
	reqStale   requestKind = iota // response_nonce is not the latest: ignored
	reqInitial                    // the first request for the type
	reqUpdate                     // a later request before any response of the type
	reqACK
	reqNACK
)

// onRequest applies a state-of-the-world request to the watch and reports
// what it was and whether a response is now owed.
func (w *watch) onRequest(req *discoveryv3.DiscoveryRequest, snap *snapshot.Snapshot) (requestKind, bool) {
	var kind requestKind
	switch {
	case w.sent && req.GetResponseNonce() != w.nonce:
		// A response the client has not seen yet supersedes this request; the
		// client will send a request carrying its nonce (X14).
		return reqStale, false
	case !w.started:
		kind = reqInitial
	case !w.sent:
		kind = reqUpdate
	case req.GetErrorDetail() != nil:
		// A NACK is told by error_detail alone, never by comparing versions
		// (X10): its version_info is what the client still runs (X11).
		kind = reqNACK
	default:
		kind = reqACK
	}

	first := !w.started
	w.started = true
	added, changed := w.subscribe(req.GetResourceNames(), first)

	set := snap.Set(w.typ.URL)
	owe := false
	switch {
	case first:
		// The full-state types always answer the first request, even with no
		// resources: that is how a client learns its names do not exist.
		owe = w.typ.FullState || w.hasAny(set)
	case changed && w.typ.FullState:
		owe = true
	case len(added) > 0:
		// A newly subscribed name is sent even if the client had it before at
		// the same version (X17): the client dropped it on unsubscribe.
		owe = anyExists(set, added)
	}
	if w.warm && kind != reqNACK {
		owe = true
	}
	if !w.typ.FullState && !w.hasAny(set) {
		// An empty response for a per-resource type means nothing (X22), and
		// Envoy reads it as an assignment gone missing; say nothing instead.
		owe = false
	}
	return kind, owe
}

// subscribe applies resource_names and returns the names newly added ("*"
// when the wildcard is) and whether the subscription changed.
func (w *watch) subscribe(names []string, first bool) (added []string, changed bool) {
	star := false
	next := make(map[string]string, len(names))
	for _, n := range names {
		if n == wildcardName {
			star = true
			continue
		}
		next[n] = w.names[n]
	}
	wildcard, legacy := star, false
	if len(names) == 0 && w.typ.Wildcard && (first || w.legacyWildcard) {
		// The legacy wildcard: an empty first request, kept while later
		// requests stay empty (X19). After an explicit subscription an empty
		// list means no resources (X18).
		wildcard, legacy = true, true
	}
	for n := range next {
		if _, ok := w.names[n]; !ok {
			added = append(added, n)
		}
	}
	changed = wildcard != w.wildcard || len(next) != len(w.names) || len(added) > 0
	if wildcard && !w.wildcard {
		added = append(added, wildcardName)
		w.wildcardVersion = ""
	}
	w.wildcard, w.legacyWildcard = wildcard, legacy
	if changed {
		w.names = next
		w.sorted = w.sorted[:0]
		for n := range next {
			w.sorted = append(w.sorted, n)
		}
		sort.Strings(w.sorted)
	}
	return added, changed
}

func anyExists(set *snapshot.Set, names []string) bool {
	for _, n := range names {
		if n == wildcardName && set.Len() > 0 || set.Get(n) != nil {
			return true
		}
	}
	return false
}

// hasAny reports whether the client's subscription matches any resource.
func (w *watch) hasAny(set *snapshot.Set) bool {
	if w.wildcard {
		return set.Len() > 0
	}
	return anyExists(set, w.sorted)
}

// changedSince reports whether a push is owed after a fleet change: a
// subscribed resource is new or changed, or, for the full-state types, one
// the client holds is gone. Identical content is never resent (X7).
func (w *watch) changedSince(snap *snapshot.Snapshot) bool {
	if !w.started {
		return false
	}
	set := snap.Set(w.typ.URL)
	if !w.typ.FullState && !w.hasAny(set) {
		return false
	}
	if !w.sent {
		return true
	}
	if w.wildcard {
		return set.Version() != w.wildcardVersion
	}
	for _, n := range w.sorted {
		held := w.names[n]
		if r := set.Get(n); r != nil {
			if r.Version != held {
				return true
			}
		} else if held != "" && w.typ.FullState {
			return true
		}
	}
	return false
}

// response builds the state-of-the-world response for the watch: every
// subscribed resource that exists, each encoded once in the snapshot and
// shared here (X8: names are unique since they come from a set).
func (w *watch) response(snap *snapshot.Snapshot, nonce string, ttl bool) *discoveryv3.DiscoveryResponse {
	set := snap.Set(w.typ.URL)
	names := w.sorted
	if w.wildcard {
		names = set.Names()
		w.wildcardVersion = set.Version()
	}
	resources := make([]*anypb.Any, 0, len(names))
	for _, n := range names {
		if r := set.Get(n); r != nil {
			resources = append(resources, r.ForSotW(ttl))
		}
	}
	for _, n := range w.sorted {
		if r := set.Get(n); r != nil {
			w.names[n] = r.Version
		} else if w.typ.FullState {
			w.names[n] = ""
		}
	}
	w.nonce, w.version, w.sent = nonce, set.Version(), true
	w.warm = false
	return &discoveryv3.DiscoveryResponse{
		VersionInfo: set.Version(),
		Resources:   resources,
		TypeUrl:     w.typ.URL,
		Nonce:       nonce,
	}
}

// heartbeat builds a response refreshing the TTL of every resource with one
// that the client holds at its current version, or returns nil if there is
// none (X41). Heartbeats are not updates: the held versions stay as they are.
func (w *watch) heartbeat(snap *snapshot.Snapshot, nonce string) *discoveryv3.DiscoveryResponse {
	if !w.sent {
		return nil
	}
	set := snap.Set(w.typ.URL)
	var resources []*anypb.Any
	for _, n := range set.TTLNames() {
		r := set.Get(n)
		held := w.names[n]
		if w.wildcard && w.wildcardVersion == set.Version() {
			held = r.Version
		}
		if held == r.Version {
			resources = append(resources, r.HeartbeatSotW())
		}
	}
	if len(resources) == 0 {
		return nil
	}
	w.nonce = nonce
	return &discoveryv3.DiscoveryResponse{VersionInfo: w.version, Resources: resources, TypeUrl: w.typ.URL, Nonce: nonce}
}
