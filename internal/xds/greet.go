package xds

import (
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
)

// greetAfter is how long an ADS stream whose only spared types are
// Listener or Cluster waits for a cheaper first message before it resends
// the smaller of them. Envoy and grpc-go send every type's first request
// back to back when a stream opens, so a per-resource type spared after
// them arrives well within it.
const greetAfter = time.Second

// Every new stream gets at least one response, even when a reconnecting
// client holds everything it would be sent (X24). Its clients reset their
// reconnect backoff only when a stream receives a message:
//   - Envoy, source/extensions/config_subscription/grpc/grpc_stream.h,
//     GrpcStream::onReceiveMessage: "Reset here so that it starts with
//     fresh backoff interval on next disconnect" (backoff_strategy_->reset()
//     is called nowhere else);
//   - grpc-go, internal/xds/clients/xdsclient/ads_stream.go, runner:
//     "Backoff state is reset upon successful receipt of at least one
//     message from the server" (recv reports whether one came).
//
// A stream that sends nothing therefore leaves the backoff of its previous
// failure in place, and every drain, connection-age rotation or failover
// the client survives silently makes its next reconnect wait longer. The
// message is the cheapest one that changes nothing for the client:
//   - a per-resource type (EDS, RDS, SDS...) spared: one resource the
//     client holds, the smallest, at its version; a client keeps what a
//     response of these types leaves out (X22), and its own versions
//     (Envoy's RDS hash, grpc-go's comparison with its cache) see no change;
//   - otherwise, on ADS, a per-resource type may still come: the spared
//     Listener or Cluster set waits greetAfter, and goes out in full (the
//     only correct response of those types; an empty one deletes
//     everything) if nothing else did, the smaller of the two;
//   - a per-type stream of Listener or Cluster has no other type: its
//     first request is not spared at all (spares).

// greet is called after a type's resend was spared on this stream: it
// sends or schedules the stream's one message if none went out yet.
func (st *sotwStream) greet(w *sotwEntry) error {
	switch {
	case st.quiet || st.nonces > 0:
		// Something went out already (nonces count every response).
		return nil
	case !w.Type.FullState:
		return st.touch(w)
	}
	st.owed = append(st.owed, w)
	if st.greetTimer == nil {
		ev := st.ev
		st.greetTimer = time.AfterFunc(greetAfter, func() { ev.post(wakeGreet) })
		st.greetDue = true
		st.onGreet = st.greetNow
	}
	return nil
}

// greetNow resends the smallest spared Listener or Cluster set if the
// stream has still sent nothing.
func (st *sotwStream) greetNow() error {
	owed := st.owed
	st.owed = nil
	snap := st.snapshot()
	if st.nonces > 0 || snap == nil {
		return nil
	}
	var pick *sotwEntry
	size := 0
	ttl := st.ttl && st.wrap
	for _, w := range owed {
		if w.HeldAs == nil {
			continue
		}
		if n := w.HeldAs.SotWSize(w.Type.URL, ttl); pick == nil || n < size {
			pick, size = w, n
		}
	}
	if pick == nil {
		return nil
	}
	pl := st.planner()
	p := &pl
	set := snap.Set(pick.Type.URL)
	next, _ := pick.Plan(p, set)
	if err := st.respond(pick, next, snap); err != nil {
		return err
	}
	expect(st.stream, &pick.TypeState, &pick.live, pick.Type.URL, set.Version(), p.Flags() != [3]bool{})
	st.done(p, false)
	return nil
}

// touch sends w's client one resource it holds, the smallest, at the
// version it holds: a response that changes nothing (see above).
func (st *sotwStream) touch(w *sotwEntry) error {
	var pick *snapshot.Resource
	for _, r := range w.Held {
		if pick == nil || len(r.Any.GetValue()) < len(pick.Any.GetValue()) ||
			len(r.Any.GetValue()) == len(pick.Any.GetValue()) && r.Name < pick.Name {
			pick = r
		}
	}
	if pick == nil {
		return nil
	}
	w.Nonce = st.nextNonce()
	resp := &discoveryv3.DiscoveryResponse{
		VersionInfo:  w.Version,
		Resources:    []*anypb.Any{pick.ForSotW(st.ttl && st.wrap)},
		TypeUrl:      w.Type.URL,
		Nonce:        w.Nonce,
		ControlPlane: st.srv.cp,
	}
	size, err := st.send(resp, false)
	if err != nil {
		return err
	}
	e := status.Event{Kind: status.ResponseSent, TypeURL: w.Type.URL, Version: w.Version, SetVersion: w.SetVersion, Nonce: w.Nonce, Resources: 1, Bytes: size, Greeting: true, At: time.Now()}
	if st.observing() && w.HeldAs != nil {
		e.Sent = w.HeldAs.Messages() // what the client holds after it
	}
	st.synced(w.Type.URL, st.live.sent(&w.live, w.Type.URL, status.Stamp{Version: e.Version, Nonce: e.Nonce, Set: e.SetVersion, At: e.At, Resources: 1}, size, e.Sent, nil, false), e.At)
	if st.wants(status.ResponseSent) {
		st.observe(&e)
	}
	if st.debugging() {
		st.log().Debug("sent one held resource unchanged: the stream's first message", "type", w.Type.Abbrev, "version", w.Version, "resource", pick.Name)
	}
	return nil
}
