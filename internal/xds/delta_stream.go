package xds

import (
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// deltaStream is the incremental half of a stream: a thin encoder over the
// per-type delta watches of the protocol core (protocol/delta.go).
type deltaStream struct {
	*stream
	watches *byType[*deltaEntry]
}

// deltaEntry is one type on a delta stream: the protocol's state of it
// (protocol.DeltaWatch) and its status record (livestatus.go).
type deltaEntry struct {
	protocol.DeltaWatch
	live liveType
}

func newDeltaEntry(t *xdstype.Type, share *protocol.Sharing) *deltaEntry {
	return &deltaEntry{DeltaWatch: protocol.NewDeltaWatch(t, share)}
}

func (w *deltaEntry) rec() *liveType { return &w.live }

func newDeltaStream(st *stream) *deltaStream {
	d := &deltaStream{stream: st, watches: &byType[*deltaEntry]{}}
	useWatches(st, d.watches)
	return d
}

func (st *deltaStream) onRequest(req *discoveryv3.DeltaDiscoveryRequest) error {
	w, err := open(st.stream, req.GetNode(), req.GetTypeUrl(), st.watches, newDeltaEntry)
	if err != nil || w == nil {
		return err
	}
	if err := st.checkRequest(req, w.Type.URL); err != nil {
		return err
	}
	// Context parameters in any order name one resource (X46).
	req.ResourceNamesSubscribe = protocol.CanonicalNames(req.ResourceNamesSubscribe)
	req.ResourceNamesUnsubscribe = protocol.CanonicalNames(req.ResourceNamesUnsubscribe)
	req.InitialResourceVersions = protocol.CanonicalVersions(req.InitialResourceVersions)
	if err := st.asking(w, req); err != nil {
		return err
	}
	t := w.Type
	// A request may both answer a response and change the subscription
	// (X28); one without a nonce is spontaneous.
	nonce, nack := req.GetResponseNonce(), req.GetErrorDetail() != nil
	// Only an answer to a response still on record is one: a nonce the
	// stream never sent or already had answered is not reported as an ACK
	// (of no version) or a NACK.
	var version string
	answered := false
	if nonce != "" {
		version, answered = w.Answered(nonce, nack)
	}
	owe := w.Subscribe(req, st.snapshot().Set(t.URL))
	// Delta subscriptions add up: bound what one type holds by name, as
	// state of the world bounds each request.
	if err := st.checkNames(len(w.Names), "the stream's subscription", t.URL); err != nil {
		return err
	}
	if err := st.checkGlobs(w.Sub, t.URL); err != nil {
		return err
	}
	// Shared before the events go out, so that whoever waits for an ACK
	// finds the node's other streams already aware of it.
	st.publishView(&w.Ledger, w.Wildcard, w.Names)
	st.subscribed(t, w.Sub, &w.Reported)
	switch {
	case answered && nack:
		st.onNACK(t, &w.live, version, w.AckedVersion, nonce, req.GetErrorDetail().GetMessage())
	case answered:
		st.ackEvent(&w.live, t.URL, version, "", nonce)
	}
	snap := st.snapshot()
	if snap == nil {
		return nil
	}
	// An answer to a response whose errors stopped at the bound is told
	// the next of them (protocol.Told.Backlog).
	if owe || answered && st.told.Backlog(t.URL) {
		pl := st.planner()
		p := &pl
		if err := st.respond(p, w, snap, owe); err != nil {
			return err
		}
		// The plan covers the whole subscription: anything it held back
		// is what the client still lacks.
		expect(st.stream, &w.TypeState, &w.live, t.URL, snap.Set(t.URL).Version(), p.Flags() != [3]bool{})
		st.done(p, false)
	} else if !w.Sent {
		expect(st.stream, &w.TypeState, &w.live, t.URL, snap.Set(t.URL).Version(), true)
	}
	if answered && st.holding {
		// An answer may release what was held back for it: request
		// pushes once this frame is gone (stack depth, see serveStream).
		st.releaseAfter = true
	}
	return nil
}

// onFleet sends each type's changes in make-before-break order: additions
// and updates by rank, each held back while what it names has not reached
// the client, and removals only once nothing the client holds names them.
func (st *deltaStream) onFleet() error {
	return pass(st.stream, st.watches, func(p *protocol.Planner, w *deltaEntry, snap *snapshot.Snapshot) error {
		return st.respond(p, w, snap, false)
	})
}

// respond sends what the client lacks of w's type; with always unset it
// sends nothing when nothing is lacking.
func (st *deltaStream) respond(p *protocol.Planner, w *deltaEntry, snap *snapshot.Snapshot, always bool) error {
	set := snap.Set(w.Type.URL)
	var d protocol.DeltaPlan
	if w.VHDS != nil {
		d = w.PlanVHDS(p, set, snap.Set(xdstype.RouteURL), st.ttl)
	} else {
		d = w.Plan(p, set, st.notFound(), st.ttl)
	}
	resources, removed := d.Resources, d.Removed
	errs := w.DeltaErrors(st.told, &d, set)
	if !always && len(resources) == 0 && len(removed) == 0 && len(errs) == 0 {
		return nil
	}
	resp := &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: snap.Version(),
		Resources:         resources,
		RemovedResources:  removed,
		TypeUrl:           w.Type.URL,
		Nonce:             st.nextNonce(),
		ControlPlane:      st.srv.cp,
		ResourceErrors:    errs,
	}
	var msg any = resp
	if w.VHDS == nil {
		// VHDS responses carry each stream's own aliases: never shared.
		msg = st.srv.enc.Delta(set, st.ttl, resp)
	}
	size, err := st.send(msg, !w.Sent)
	if err != nil {
		return err
	}
	w.Sent = true
	w.Version = set.Version()
	if p.Flags() != [3]bool{} {
		// Something of the type is held back (a new resource waits for
		// its cluster, a removed one stays): the client is not brought to
		// the set's version, and its ACK must not say so. The planner's
		// flags are this type's alone (pass clears them per type).
		w.Version = "partial-" + w.Version
	}
	w.SentResponse(resp.Nonce, w.Version, set, d, p.Now)
	st.publishView(&w.Ledger, w.Wildcard, w.Names)
	var sent []proto.Message
	switch {
	case !st.observing():
	case d.Step != nil:
		sent = d.Step.Messages() // shared by every stream making this move
	default:
		sent = make([]proto.Message, 0, d.Size())
		d.Each(func(_ string, r *snapshot.Resource) {
			if r != nil {
				sent = append(sent, r.Message)
			}
		})
	}
	st.sentEvent(w, resp, sent, size)
	return nil
}

// sentEvent reports and logs a response sent: apart from respond, so that
// the event and the log's arguments are not on the stack under the send
// (stack depth, see serveStream).
//
//go:noinline
func (st *deltaStream) sentEvent(w *deltaEntry, resp *discoveryv3.DeltaDiscoveryResponse, sent []proto.Message, size int) {
	now := time.Now()
	st.synced(w.Type.URL, st.live.sent(&w.live, w.Type.URL, status.Stamp{Version: w.Version, Nonce: resp.Nonce, At: now, Resources: len(resp.Resources)}, size, sent, resp.RemovedResources, false), now)
	if st.wants(status.ResponseSent) {
		st.observe(&status.Event{Kind: status.ResponseSent, TypeURL: w.Type.URL, Version: w.Version, Nonce: resp.Nonce, Resources: len(resp.Resources), Sent: sent, Removed: resp.RemovedResources, Bytes: size, At: now})
	}
	if st.debugging() {
		st.log().Debug("sent", "type", w.Type.Abbrev, "system_version", resp.SystemVersionInfo, "nonce", resp.Nonce, "resources", len(resp.Resources), "removed", len(resp.RemovedResources))
	}
}

// onHeartbeat refreshes the TTLs of what the client holds.
func (st *deltaStream) onHeartbeat() error {
	snap := st.snapshot()
	now := time.Now()
	for _, t := range st.srv.opts.Registry.Ranked() {
		w := st.watches.at(t.URL)
		if w == nil {
			continue
		}
		set := snap.Set(t.URL)
		beats := w.Heartbeats(set)
		if len(beats) == 0 {
			continue
		}
		resp := &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: snap.Version(),
			Resources:         beats,
			TypeUrl:           t.URL,
			Nonce:             st.nextNonce(),
			ControlPlane:      st.srv.cp,
		}
		size, err := st.send(resp, false)
		if err != nil {
			return err
		}
		w.SentResponse(resp.Nonce, w.Version, set, protocol.DeltaPlan{}, now)
		st.live.heartbeat(&w.live, t.URL, size)
		if st.wants(status.ResponseSent) {
			st.observe(&status.Event{Kind: status.ResponseSent, TypeURL: t.URL, Version: w.Version, Nonce: resp.Nonce, Resources: len(beats), Heartbeat: true, Bytes: size})
		}
	}
	return nil
}

// checkRequest bounds a request's names: how many in each field, and how
// long each.
func (st *deltaStream) checkRequest(req *discoveryv3.DeltaDiscoveryRequest, typeURL string) error {
	for _, f := range []struct {
		name string
		n    int
	}{{"resource_names_subscribe", len(req.GetResourceNamesSubscribe())}, {"resource_names_unsubscribe", len(req.GetResourceNamesUnsubscribe())}, {"initial_resource_versions", len(req.GetInitialResourceVersions())}} {
		if err := st.checkNames(f.n, f.name, typeURL); err != nil {
			return err
		}
	}
	if err := st.checkNameBytes(req.GetResourceNamesSubscribe(), "resource_names_subscribe", typeURL); err != nil {
		return err
	}
	if err := st.checkNameBytes(req.GetResourceNamesUnsubscribe(), "resource_names_unsubscribe", typeURL); err != nil {
		return err
	}
	for n := range req.GetInitialResourceVersions() {
		if err := checkNameLen(n, "initial_resource_versions", typeURL); err != nil {
			return err
		}
	}
	return nil
}
