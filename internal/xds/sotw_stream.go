package xds

import (
	"slices"
	"strconv"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// sotwStream is the state-of-the-world half of a stream: a thin encoder
// over the per-type watches of the protocol core (protocol/sotw.go).
type sotwStream struct {
	*stream
	watches *byType[*sotwEntry]
	// warmNext holds the types (EDS, RDS) a response warmed on ADS before
	// the client first asked for them on this stream: their first request
	// is answered even if the client claims to hold the version (X24, X38).
	// At most two: a slice, nil once empty, not a map kept for the
	// stream's life.
	warmNext []string
	// owed are the Listener and Cluster watches whose resend was spared
	// while the stream had sent nothing: one may still have to go out as
	// the stream's first message (greet.go).
	owed []*sotwEntry
}

// sotwEntry is one type on a state-of-the-world stream: the protocol's
// state of it (protocol.Watch) and its status record (livestatus.go).
type sotwEntry struct {
	protocol.Watch
	live liveType
}

func newSotWEntry(t *xdstype.Type, share *protocol.Sharing) *sotwEntry {
	return &sotwEntry{Watch: protocol.NewWatch(t, share)}
}

func (w *sotwEntry) rec() *liveType { return &w.live }

func newSotWStream(st *stream) *sotwStream {
	s := &sotwStream{stream: st, watches: &byType[*sotwEntry]{}}
	useWatches(st, s.watches)
	return s
}

func (st *sotwStream) onRequest(req *discoveryv3.DiscoveryRequest) error {
	w, err := open(st.stream, req.GetNode(), req.GetTypeUrl(), st.watches, newSotWEntry)
	if err != nil || w == nil {
		return err
	}
	if err := st.checkNames(len(req.GetResourceNames()), "resource_names", w.Type.URL); err != nil {
		return err
	}
	if err := st.checkNameBytes(req.GetResourceNames(), "resource_names", w.Type.URL); err != nil {
		return err
	}
	// Context parameters in any order name one resource (X46).
	req.ResourceNames = protocol.CanonicalNames(req.ResourceNames)
	if err := st.asking(w, req); err != nil {
		return err
	}
	t := w.Type
	snap := st.snapshot()
	sub := w.Sub
	kind, owe := w.OnRequest(req, snap)
	if err := st.checkGlobs(w.Sub, t.URL); err != nil {
		return err
	}
	// Shared before the events go out, so that whoever waits for an ACK
	// finds the node's other streams already aware of it.
	st.publishView(&w.Ledger, w.Wildcard, w.Names)
	st.subscribed(t, w.Sub, &w.Reported)
	switch kind {
	case protocol.ReqStale:
		if st.debugging() {
			st.log().Debug("ignoring request with stale nonce", "type", t.Abbrev, "nonce", bounded(req.GetResponseNonce(), maxLogged), "latest", w.Nonce)
		}
		return nil
	case protocol.ReqACK:
		st.ackEvent(&w.live, t.URL, req.GetVersionInfo(), w.AckedSet, req.GetResponseNonce())
	case protocol.ReqNACK:
		st.onNACK(t, &w.live, w.Version, w.AckedVersion, req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
	}
	if kind == protocol.ReqInitial {
		defer st.warmed(t.URL)
	}
	if snap == nil {
		return nil
	}
	if owe {
		err = st.answerOwed(req, w, kind, snap)
	} else {
		err = st.answerUnowed(w, kind, sub, snap)
	}
	if err != nil {
		return err
	}
	if (kind == protocol.ReqACK || kind == protocol.ReqNACK) && st.holding {
		// An answer may release what was held back for it: request
		// pushes once this frame is gone (stack depth, see serveStream).
		st.releaseAfter = true
	}
	return nil
}

// answerOwed answers a request that owes a response (a new subscription,
// a changed one, or an initial request): the planned response, or what
// the client still lacks.
func (st *sotwStream) answerOwed(req *discoveryv3.DiscoveryRequest, w *sotwEntry, kind protocol.RequestKind, snap *snapshot.Snapshot) error {
	t := w.Type
	pl := st.planner()
	p := &pl
	next, _ := w.Plan(p, snap.Set(t.URL))
	switch {
	case kind == protocol.ReqInitial && st.spares(req, w, next, p, snap.Set(t.URL)):
		st.spare(w, next, snap.Set(t.URL))
		if err := st.greet(w); err != nil {
			return err
		}
		if err := st.tellMissing(w, next, snap); err != nil {
			return err
		}
	case w.Type.FullState || len(next.Next) > 0:
		// What the request asked for may be held back; a per-resource
		// type then has nothing to say yet (X22).
		if err := st.respond(w, next, snap); err != nil {
			return err
		}
	default:
		if err := st.tellMissing(w, next, snap); err != nil {
			return err
		}
	}
	// The plan covers the whole subscription: anything it held back
	// is what the client still lacks.
	expect(st.stream, &w.TypeState, &w.live, t.URL, snap.Set(t.URL).Version(), p.Flags() != [3]bool{})
	st.done(p, false)
	return nil
}

// answerUnowed handles a request that owes no response.
func (st *sotwStream) answerUnowed(w *sotwEntry, kind protocol.RequestKind, sub *protocol.Subscription, snap *snapshot.Snapshot) error {
	t := w.Type
	// A per-resource type owes no response when nothing subscribed
	// exists (X22); a client reading resource_errors is still told,
	// and its answer to a response whose errors stopped at the bound
	// is told the next of them.
	told := false
	answer := kind == protocol.ReqACK || kind == protocol.ReqNACK
	if st.told != nil && (w.Sub != sub || answer && st.told.Backlog(t.URL)) {
		var err error
		if told, err = st.tellHeld(w, snap); err != nil {
			return err
		}
	}
	if told || !w.Sent {
		expect(st.stream, &w.TypeState, &w.live, t.URL, snap.Set(t.URL).Version(), !told)
	}
	return nil
}

// onFleet brings the client toward the newest snapshot: in make-before-break
// order, every type whose planned content changed.
func (st *sotwStream) onFleet() error {
	return pass(st.stream, st.watches, func(p *protocol.Planner, w *sotwEntry, snap *snapshot.Snapshot) error {
		next, changed := w.Plan(p, snap.Set(w.Type.URL))
		if !changed {
			return st.tellMissing(w, next, snap)
		}
		return st.respond(w, next, snap)
	})
}

// tellMissing sends a client that reads resource_errors those a plan with
// nothing else worth a response still owes it (xRFC TP3): a per-resource
// type answers neither a missing name nor a deletion (X22), and the
// client would wait out its does-not-exist timer. Nothing for others.
func (st *sotwStream) tellMissing(w *sotwEntry, next protocol.Outcome, snap *snapshot.Snapshot) error {
	if st.told == nil {
		return nil
	}
	errs := w.SotWErrors(st.told, next, snap.Set(w.Type.URL))
	if len(errs) == 0 {
		return nil
	}
	return st.respondWith(w, next, snap, errs)
}

// tellHeld is tellMissing for a request owed no response: what the client
// holds stays as it is. It reports whether a response went out.
func (st *sotwStream) tellHeld(w *sotwEntry, snap *snapshot.Snapshot) (bool, error) {
	sent := w.Nonce
	err := st.tellMissing(w, protocol.Outcome{Next: w.Held, As: w.HeldAs}, snap)
	return w.Nonce != sent, err
}

func (st *sotwStream) respond(w *sotwEntry, next protocol.Outcome, snap *snapshot.Snapshot) error {
	return st.respondWith(w, next, snap, w.SotWErrors(st.told, next, snap.Set(w.Type.URL)))
}

// respondWith sends the response giving the client next, with errs, the
// resource_errors it carries (planned before it: Response clears the names
// just subscribed, which are told again).
func (st *sotwStream) respondWith(w *sotwEntry, next protocol.Outcome, snap *snapshot.Snapshot, errs []*discoveryv3.ResourceError) error {
	first := !w.Sent
	set := snap.Set(w.Type.URL)
	ttl := st.ttl && st.wrap
	resp := w.Response(next, st.nextNonce(), ttl)
	resp.ResourceErrors = errs
	w.SetVersion = set.Version()
	resp.ControlPlane = st.srv.cp
	size, err := st.send(st.srv.enc.SotW(set, ttl, resp), first)
	if err != nil {
		return err
	}
	st.publishView(&w.Ledger, w.Wildcard, w.Names)
	if st.typeURL == "" {
		// Envoy warms a cluster or listener until it gets a fresh assignment
		// or route configuration, so on ADS the next request for those is
		// answered even if unchanged (X38).
		st.markWarm(protocol.Warms(w.Type.URL))
	}
	var sent []proto.Message
	switch {
	case !st.observing():
	case next.As != nil:
		sent = next.As.Messages() // shared by every stream in this state
	default:
		sent = make([]proto.Message, 0, len(next.Next))
		for _, r := range next.Next {
			sent = append(sent, r.Message)
		}
	}
	st.sentEvent(w, resp, sent, size)
	return nil
}

// sentEvent reports and logs a response sent. Apart from respond, so that
// the event and the log's arguments are on the stack only while they are
// reported, not under the send (stack depth, see serveStream).
//
//go:noinline
func (st *sotwStream) sentEvent(w *sotwEntry, resp *discoveryv3.DiscoveryResponse, sent []proto.Message, size int) {
	now := time.Now()
	st.synced(w.Type.URL, st.live.sent(&w.live, w.Type.URL, status.Stamp{Version: resp.VersionInfo, Nonce: resp.Nonce, Set: w.SetVersion, At: now, Resources: len(resp.Resources)}, size, sent, nil, false), now)
	if st.wants(status.ResponseSent) {
		st.observe(&status.Event{Kind: status.ResponseSent, TypeURL: w.Type.URL, Version: resp.VersionInfo, SetVersion: w.SetVersion, Nonce: resp.Nonce, Resources: len(resp.Resources), Sent: sent, Bytes: size, At: now})
	}
	if st.debugging() {
		st.log().Debug("sent", "type", w.Type.Abbrev, "version", resp.VersionInfo, "nonce", resp.Nonce, "resources", len(resp.Resources))
	}
}

func (st *sotwStream) markWarm(typeURL string) {
	if typeURL == "" {
		return
	}
	if w := st.watches.at(typeURL); w != nil && w.Started {
		w.Warm = true
		return
	}
	// Not asked for yet on this stream (a reconnecting Envoy asks for
	// clusters before their assignments): its first request must be
	// answered, not spared.
	if !slices.Contains(st.warmNext, typeURL) {
		st.warmNext = append(st.warmNext, typeURL)
	}
}

// warmed forgets that typeURL's first request is owed an answer.
func (st *sotwStream) warmed(typeURL string) {
	st.warmNext = slices.DeleteFunc(st.warmNext, func(u string) bool { return u == typeURL })
	if len(st.warmNext) == 0 {
		st.warmNext = nil
	}
}

// spares reports whether the response o planned for a type's first request
// on this stream can be left unsent because the client already holds it
// (X24): the stream's side of SparesResend, which decides.
func (st *sotwStream) spares(req *discoveryv3.DiscoveryRequest, w *sotwEntry, o protocol.Outcome, p *protocol.Planner, set *snapshot.Set) bool {
	on := protocol.StreamTraits{
		PerType: st.typeURL != "",
		Quiet:   st.quiet,
		TTL:     st.ttl && st.wrap,
		Warmed:  w.Warm || slices.Contains(st.warmNext, w.Type.URL),
	}
	return protocol.SparesResend(req, w.Type, o, p.Flags() != [3]bool{}, set, on)
}

// spare records that the client holds o, what its first request of the
// type would have been answered with, without sending it (X24), and
// reports it: status shows the type sent and ACKed at its version.
func (st *sotwStream) spare(w *sotwEntry, o protocol.Outcome, set *snapshot.Set) {
	w.Adopt(o, set)
	// Shared like a response: the node's other per-type streams hold back
	// nothing for what this client already has.
	st.publishView(&w.Ledger, w.Wildcard, w.Names)
	ttl := st.ttl && st.wrap
	var held []proto.Message
	if st.observing() {
		held = o.As.Messages() // shared by every stream in this state
	}
	if st.debugging() {
		st.log().Debug("spared a resend: the reconnecting client holds this version", "type", w.Type.Abbrev, "version", w.Version, "resources", len(o.As.Names))
	}
	now := time.Now()
	st.synced(w.Type.URL, st.live.sent(&w.live, w.Type.URL, status.Stamp{Version: w.Version, Set: w.SetVersion, At: now, Resources: len(o.As.Names)}, 0, held, nil, true), now)
	st.observe(&status.Event{Kind: status.ResponseSpared, TypeURL: w.Type.URL, Version: w.Version, SetVersion: w.SetVersion, Resources: len(o.As.Names), Sent: held, Bytes: o.As.SotWSize(w.Type.URL, ttl), At: now})
}

// onHeartbeat refreshes the TTLs of what the client holds.
func (st *sotwStream) onHeartbeat() error {
	snap := st.snapshot()
	for _, t := range st.srv.opts.Registry.Ranked() {
		w := st.watches.at(t.URL)
		if w == nil {
			continue
		}
		nonce := strconv.FormatUint(st.nonces+1, 10)
		resp := w.Heartbeat(snap.Set(t.URL), nonce)
		if resp == nil {
			continue
		}
		st.nonces++
		resp.ControlPlane = st.srv.cp
		size, err := st.send(resp, false)
		if err != nil {
			return err
		}
		st.live.heartbeat(&w.live, t.URL, size)
		if st.wants(status.ResponseSent) {
			st.observe(&status.Event{Kind: status.ResponseSent, TypeURL: t.URL, Version: resp.VersionInfo, Nonce: nonce, Resources: len(resp.Resources), Heartbeat: true, Bytes: size})
		}
	}
	return nil
}
