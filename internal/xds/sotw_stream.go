package xds

import (
	"strconv"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// sotwStream is the state-of-the-world half of a stream: a thin encoder
// over the per-type watches in sotw.go.
type sotwStream struct {
	*stream
	watches map[string]*watch
}

func newSotWStream(st *stream) *sotwStream {
	s := &sotwStream{stream: st, watches: map[string]*watch{}}
	useWatches(st, s.watches)
	return s
}

func (st *sotwStream) onRequest(req *discoveryv3.DiscoveryRequest) error {
	w, err := open(st.stream, req.GetNode(), req.GetTypeUrl(), st.watches, newWatch)
	if err != nil || w == nil {
		return err
	}
	if err := st.checkNames(len(req.GetResourceNames()), "resource_names", w.typ.URL); err != nil {
		return err
	}
	t := w.typ
	snap := st.snapshot()
	kind, owe := w.onRequest(req, snap)
	// Shared before the events go out, so that whoever waits for an ACK
	// finds the node's other streams already aware of it.
	st.publishView(&w.ledger, w.wildcard, w.names)
	switch kind {
	case reqStale:
		st.log.Debug("ignoring request with stale nonce", "type", t.Abbrev, "nonce", bounded(req.GetResponseNonce(), maxLogged), "latest", w.nonce)
		return nil
	case reqACK:
		st.observe(Event{Kind: RequestACK, TypeURL: t.URL, Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce()})
	case reqNACK:
		st.onNACK(t, w.version, w.ackedVersion, req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
	}
	if snap == nil {
		return nil
	}
	if owe {
		p := st.planner()
		// What the request asked for may be held back; a per-resource type
		// then has nothing to say yet (X22).
		if next, _ := w.plan(p, snap.Set(t.URL)); w.typ.FullState || len(next.next) > 0 {
			if err := st.respond(w, next, snap, p.now); err != nil {
				return err
			}
		}
		// The plan covers the whole subscription: anything it held back
		// is what the client still lacks.
		expect(st.stream, w, t.URL, snap.Set(t.URL).Version(), p.flags() != [3]bool{})
		p.done(false)
	} else if !w.sent {
		expect(st.stream, w, t.URL, snap.Set(t.URL).Version(), true)
	}
	if (kind == reqACK || kind == reqNACK) && st.holding {
		// An answer may release what was held back for it.
		return st.onFleet()
	}
	return nil
}

// onFleet brings the client toward the newest snapshot: in make-before-break
// order, every type whose planned content changed.
func (st *sotwStream) onFleet() error {
	return pass(st.stream, st.watches, func(p *planner, w *watch, snap *snapshot.Snapshot) error {
		next, changed := w.plan(p, snap.Set(w.typ.URL))
		if !changed {
			return nil
		}
		return st.respond(w, next, snap, p.now)
	})
}

func (st *sotwStream) respond(w *watch, next outcome, snap *snapshot.Snapshot, now time.Time) error {
	first := !w.sent
	set := snap.Set(w.typ.URL)
	ttl := st.ttl && st.wrap
	resp := w.response(next, set, st.nextNonce(), ttl, now)
	resp.ControlPlane = st.srv.cp
	size, err := st.send(st.srv.shareable(set, ttl, resp), first)
	if err != nil {
		return err
	}
	st.publishView(&w.ledger, w.wildcard, w.names)
	if st.typeURL == "" {
		// Envoy warms a cluster or listener until it gets a fresh assignment
		// or route configuration, so on ADS the next request for those is
		// answered even if unchanged (X38).
		switch w.typ.URL {
		case xdstype.ClusterURL:
			st.markWarm(xdstype.EndpointURL)
		case xdstype.ListenerURL:
			st.markWarm(xdstype.RouteURL)
		}
	}
	var sent []proto.Message
	switch {
	case !st.observing():
	case next.as != nil:
		sent = next.as.messages() // shared by every stream in this state
	default:
		sent = make([]proto.Message, 0, len(next.next))
		for _, r := range next.next {
			sent = append(sent, r.Message)
		}
	}
	st.observe(Event{Kind: ResponseSent, TypeURL: w.typ.URL, Version: resp.VersionInfo, Nonce: resp.Nonce, Resources: len(resp.Resources), Sent: sent, Bytes: size})
	st.log.Debug("sent", "type", w.typ.Abbrev, "version", resp.VersionInfo, "nonce", resp.Nonce, "resources", len(resp.Resources))
	return nil
}

func (st *sotwStream) markWarm(typeURL string) {
	if w := st.watches[typeURL]; w != nil && w.started {
		w.warm = true
	}
}

// onHeartbeat refreshes the TTLs of what the client holds.
func (st *sotwStream) onHeartbeat() error {
	snap := st.snapshot()
	for _, t := range st.srv.opts.Registry.Ranked() {
		w := st.watches[t.URL]
		if w == nil {
			continue
		}
		nonce := strconv.FormatUint(st.nonces+1, 10)
		resp := w.heartbeat(snap.Set(t.URL), nonce)
		if resp == nil {
			continue
		}
		st.nonces++
		resp.ControlPlane = st.srv.cp
		size, err := st.send(resp, false)
		if err != nil {
			return err
		}
		st.observe(Event{Kind: ResponseSent, TypeURL: t.URL, Version: resp.VersionInfo, Nonce: nonce, Resources: len(resp.Resources), Heartbeat: true, Bytes: size})
	}
	return nil
}
