package xds

import (
	"strconv"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// sotwStream is the state-of-the-world half of a stream: a thin encoder
// over the per-type watches in sotw.go.
type sotwStream struct {
	*stream
	watches map[string]*watch
}

func (st *sotwStream) onRequest(req *discoveryv3.DiscoveryRequest) error {
	if err := st.identify(req.GetNode()); err != nil {
		return err
	}
	t, err := st.resolveType(req.GetTypeUrl())
	if err != nil || t == nil {
		return err
	}
	w := st.watches[t.URL]
	if w == nil {
		w = &watch{typ: t}
		st.watches[t.URL] = w
	}
	snap := st.snapshot()
	kind, owe := w.onRequest(req, snap)
	switch kind {
	case reqStale:
		st.log.Debug("ignoring request with stale nonce", "type", t.Abbrev, "nonce", req.GetResponseNonce(), "latest", w.nonce)
		return nil
	case reqACK:
		st.observe(Event{Kind: RequestACK, TypeURL: t.URL, Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce()})
	case reqNACK:
		st.onNACK(t, w.version, req.GetVersionInfo(), req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
	}
	if owe && snap != nil {
		return st.respond(w, snap)
	}
	return nil
}

// onFleet sends, in make-before-break order, every type whose subscribed
// content changed.
func (st *sotwStream) onFleet() error {
	snap := st.snapshot()
	if snap == nil {
		return nil
	}
	for _, t := range st.srv.opts.Registry.Ranked() {
		w := st.watches[t.URL]
		if w == nil || !w.changedSince(snap) {
			continue
		}
		if err := st.respond(w, snap); err != nil {
			return err
		}
	}
	return nil
}

func (st *sotwStream) respond(w *watch, snap *snapshot.Snapshot) error {
	resp := w.response(snap, st.nextNonce(), st.ttl && st.wrap)
	resp.ControlPlane = st.srv.cp
	if err := st.send(resp); err != nil {
		return err
	}
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
	st.observe(Event{Kind: ResponseSent, TypeURL: w.typ.URL, Version: resp.VersionInfo, Nonce: resp.Nonce, Resources: len(resp.Resources)})
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
		resp := w.heartbeat(snap, nonce)
		if resp == nil {
			continue
		}
		st.nonces++
		resp.ControlPlane = st.srv.cp
		if err := st.send(resp); err != nil {
			return err
		}
		st.observe(Event{Kind: ResponseSent, TypeURL: t.URL, Version: resp.VersionInfo, Nonce: nonce, Resources: len(resp.Resources), Heartbeat: true})
	}
	return nil
}
