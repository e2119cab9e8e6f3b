package xds

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xds/wire"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// stream is what every xDS stream has, whatever its variant: the node, the
// fleet it serves from, nonces, and the bookkeeping that keeps logs quiet.
// The state-of-the-world and delta halves embed it.
type stream struct {
	// mu is held while the stream handles a request or a wakeup
	// (wakeups.go): one at a time, as one loop would.
	mu sync.Mutex
	// ev is what wakes the stream besides its requests; hb its TTL
	// heartbeats.
	ev *wakeups
	hb heartbeats
	// closing ends the stream (serveStream); nil once it ran. It runs
	// before the stream's status goes out.
	closing func(err error)
	// reg is the stream as Drain and balancing see it.
	reg     *openStream
	srv     *Server
	gs      grpc.ServerStream
	id      uint64
	nonces  uint64
	typeURL string // "" on ADS

	// node is what the stream keeps of its node once identified
	// (keptNode), mnode the node in the group rules' terms.
	node  *corev3.Node
	mnode nodegroup.Node
	// claimed is the node of the first request, before it is accepted,
	// cut to the bounded fields people read (claimedNode): what a refusal
	// at stream open reports.
	claimed *corev3.Node
	// conn is the client's connection (its remote address, the peer),
	// for eviction; the connection's own strings when it is tracked.
	conn guard.Key
	// tconn is that connection when the server tracks it (nil otherwise),
	// to tell an eviction from a client leaving.
	tconn *guard.Conn
	// ident is what the connection's verified client certificate proves.
	ident identity.Identity
	// boardKey is the node id and identity under which per-type streams
	// of one node share their state (nodeBoardKey).
	boardKey string
	// watch bounds each send (guard.SendWatch).
	watch *guard.SendWatch
	fleet *fleet.Fleet
	group *fleet.Group // the node's group in fleet; nil for none
	// withheld is the group's snapshot less the Secrets the stream may not
	// have; nil when it may have them all. withheldLogged is what was last
	// logged about it.
	withheld       *withheld
	withheldLogged uint64 // a hash of what was logged (logWithheld)
	// entitled is where withheld comes from, shared with the streams of
	// the same identity and group; held so the shared entry lives.
	entitled *entitled
	// opened is when the stream was accepted, for its disconnect line.
	opened time.Time

	// holdings returns a type's state on this stream, nil if the client
	// has not asked for the type here: what the planner sees.
	holdings protocol.HoldView
	// holdSince is when a hold for a slow client began, for its bound.
	holdSince time.Time
	// wake wakes the stream (wakeHold) at wakeDue, when a hold reaches
	// its bound; zero: not armed.
	wake    *time.Timer
	wakeDue time.Time
	// greetTimer wakes the stream (wakeGreet) when a state-of-the-world
	// stream whose resends were all spared still owes its client a first
	// message (greet.go): greetDue (below) is set until it is handled,
	// and onGreet sends it. Until the first request it is the bound on
	// that request's wait (firstrequest.go).
	greetTimer *time.Timer
	onGreet    func() error
	// leave unregisters from the board, where another per-type stream of
	// the same node wakes this one (wakeKick) when it publishes what its
	// client ACKed.
	leave func()
	// heldLogged remembers the resource versions already logged as held
	// back for a rejected dependency.
	heldLogged map[string]bool
	// windowStart (nanoseconds since the server's epoch) and windowCount
	// (with the flags, below) count requests for flood control.
	windowStart int64
	// live is the stream's status, which status reads when asked
	// (livestatus.go); nil when the server has no observer.
	live *StreamStatus
	// told is set when the client reads resource_errors (xRFC TP3): the
	// names it was told do not exist (protocol.Told).
	told *protocol.Told

	windowCount int32

	// The flags, together: each apart would take a word of every stream.
	delta bool
	// noGroupLogged keeps the "no matching group" warning to one a stream.
	noGroupLogged bool
	// ttl is set when the client supports resource TTLs; wrap when it also
	// unwraps Resource in state-of-the-world responses (X42).
	ttl, wrap bool
	// unknownLogged is set once a request for a type not served was
	// logged (X2): once a stream, however many such requests come.
	unknownLogged bool
	// holding is set while something is held back for make-before-break.
	holding bool
	// releaseAfter: the request just handled answered what something was
	// held back for; request pushes once the handler has returned.
	releaseAfter bool
	// quiet is set for a stream that is one REST poll (ServeStream): it
	// owes no first message (greet.go), its start and end are logged at
	// debug level (an Envoy polls every second or so), and its events say
	// Poll.
	quiet    bool
	greetDue bool
}

// log returns the stream's logger: its lines name the stream, and once
// it is identified its node and verified identity. Built for each line
// rather than kept: a logger with attributes costs a few hundred bytes,
// on every stream of the fleet, while most streams log a line or two.
func (st *stream) log() *slog.Logger {
	if st.node == nil {
		return st.srv.log.With("stream", st.id)
	}
	if st.ident.Verified() {
		return st.srv.log.With("stream", st.id, "node", st.node.GetId(), "identity", st.ident.String())
	}
	return st.srv.log.With("stream", st.id, "node", st.node.GetId())
}

// debugging reports whether debug lines are wanted. Callers build a
// line's arguments, and the logger, only then: some lines are for every
// response, and boxing their arguments costs allocations even when the
// line is dropped.
func (st *stream) debugging() bool {
	return st.srv.log.Enabled(context.Background(), slog.LevelDebug)
}

// logRejectedHold says, once per resource version, that r is kept from the
// client because the client rejected what it names: the operator's answer
// to "why did this proxy not get my route?".
func (st *stream) logRejectedHold(r *snapshot.Resource, dependency string) {
	key := r.Name + "\x00" + r.Version
	if st.heldLogged[key] {
		return
	}
	if st.heldLogged == nil {
		st.heldLogged = map[string]bool{}
	}
	st.heldLogged[key] = true
	st.log().Warn("holding a resource back: the proxy rejected what it names; it goes out once the config changes", "resource", r.Name, "version", r.Version, "rejected", dependency)
}

// others returns what another per-type stream of this node publishes for
// typeURL, for make-before-break across per-type streams, or nil.
func (st *stream) others(typeURL string) protocol.Holdings {
	if st.typeURL == "" || st.node == nil {
		return nil
	}
	if v := st.srv.board.lookup(st.boardKey, typeURL); v != nil {
		return v
	}
	return nil
}

// publishView shares this per-type stream's ledger with the node's other
// per-type streams, after each request and each response: what the client
// was sent keeps what it names from being removed, what it ACKed releases
// what waits for it.
func (st *stream) publishView(l *protocol.Ledger, wildcard bool, names map[string]struct{}) {
	if st.typeURL == "" || st.node == nil {
		return
	}
	st.srv.board.publish(st.boardKey, st.typeURL, freeze(l, wildcard, names), st.ev)
}

// planner returns a planner for one pass over what the stream's client
// holds, now. A value: a caller that keeps it to itself keeps it on its
// stack.
func (st *stream) planner() protocol.Planner {
	return protocol.NewPlanner(st.holdings, &st.srv.plan, time.Now(), st.holdSince)
}

// putPlanner gives p, a pass's planner, back to the pool, holding nothing.
func (s *Server) putPlanner(p *protocol.Planner) {
	*p = protocol.Planner{}
	s.planners.Put(p)
}

// done carries out what p decided: the holds for a rejected dependency
// are logged, and the hold state and the wake-up at a hold's bound are
// kept (Planner.Decide). full is set after a pass over every type.
func (st *stream) done(p *protocol.Planner, full bool) {
	st.logRejectedHolds(p)
	d := p.Decide(full, st.holding, st.holdSince)
	st.holding, st.holdSince = d.Holding, d.Since
	if d.Rewake {
		st.wakeAt(d.Wake)
	}
}

// logRejectedHolds logs what p held back because the client rejected what
// it names (logRejectedHold).
func (st *stream) logRejectedHolds(p *protocol.Planner) {
	for _, h := range p.RejectedHolds() {
		st.logRejectedHold(h.Resource, h.Dependency)
	}
}

// wakeAt arms the stream's one-shot timer to plan again at t (zero: never).
// A timer that fired for an earlier t is ignored (woken).
func (st *stream) wakeAt(t time.Time) {
	st.wakeDue = t
	if t.IsZero() {
		// Holds are brief and rare: no need to keep a stopped timer on
		// every stream that ever had one.
		if st.wake != nil {
			st.wake.Stop()
		}
		st.wake = nil
		return
	}
	d := max(time.Until(t), 0)
	if st.wake == nil {
		ev := st.ev
		st.wake = time.AfterFunc(d, func() { ev.post(wakeHold) })
	} else {
		st.wake.Reset(d)
	}
}

// ServeStream runs one stream of either variant over gs until it ends, with
// the same protocol core as the gRPC methods: typeURL is "" for ADS. It is
// how other transports (REST polling) reuse the core; gs.Context() must
// carry the caller's peer (google.golang.org/grpc/peer) for identity.
func (s *Server) ServeStream(gs grpc.ServerStream, typeURL string, delta bool) error {
	st := s.newStream(gs, typeURL, delta)
	// A transport without streams (REST polling) has no reconnect
	// backoff to reset: no first message is owed (greet.go).
	st.quiet = true
	return s.serveStream(st)
}

// serve runs one stream of either variant until it ends.
func (s *Server) serve(gs grpc.ServerStream, typeURL string, delta bool) error {
	return s.serveStream(s.newStream(gs, typeURL, delta))
}

func (s *Server) newStream(gs grpc.ServerStream, typeURL string, delta bool) *stream {
	st := &stream{
		srv:     s,
		gs:      gs,
		id:      s.ids.Add(1),
		typeURL: typeURL,
		delta:   delta,
	}
	if st.observing() {
		st.live = &StreamStatus{}
	}
	return st
}

func (s *Server) serveStream(st *stream) error {
	w, cutC, refused := s.setUp(st)
	if refused != nil {
		return refused
	}
	var err error
	if st.delta {
		err = runDelta(w, cutC, st)
	} else {
		err = runSotW(w, cutC, st)
	}
	// Unless the stream was ended while it waited for a request.
	st.mu.Lock()
	st.close(err)
	st.mu.Unlock()
	return err
}

// The stream's goroutine spends its life under serveStream, its frame
// and run's on the stack: they are kept small, the setting up in setUp and
// the variants' own in runDelta and runSotW, whose frames are gone by
// then or small. A stack that grows past 8 KB once stays at 16 KB while
// the stream waits for a request, for every proxy (gRPC's frames under the
// handler already take about 1.5 KB of the 8).

// setUp readies st to run: what ends it from outside (a drain, the
// server's shutdown: no context of its own, as each level of cancellation
// costs every stream a few hundred bytes), its peer and connection, its
// place among the open streams. refused is the error to end it with at
// once (Pylon is draining).
func (s *Server) setUp(st *stream) (w *wakeups, cutC chan struct{}, refused error) {
	gs := st.gs
	w, cutC = newWakeups(st)
	end := func(cause error) { w.stop(s.ended(cause)) }
	if p, ok := peer.FromContext(gs.Context()); ok {
		st.conn = guard.KeyOf(p)
		if st.tconn = s.conns.Get(st.conn); st.tconn != nil {
			st.conn = st.tconn.Key()
		}
	}
	reg, ok := s.open.add(st.conn, st.tconn, end, st.delta, st.quiet)
	if !ok {
		return w, cutC, s.refuseDraining(st)
	}
	st.reg = reg
	if s.life.Err() != nil {
		// Shutdown ends the streams it finds open (endAll); this one was
		// not yet among them.
		end(context.Canceled)
	}
	st.ident = identity.FromContext(gs.Context())
	st.watch = guard.NewSendWatch(s.slotHold, s.evictAfter, func() { s.evict(st.conn) })
	st.closing = func(err error) {
		st.closed(err)
		st.watch.Stop()
		if release := s.open.remove(reg); release != nil {
			release()
		}
	}
	return w, cutC, nil
}

//go:noinline
func runDelta(w *wakeups, cutC chan struct{}, st *stream) error {
	d := newDeltaStream(st)
	return run(w, cutC, st, d.onRequest, d.onFleet, d.onHeartbeat)
}

//go:noinline
func runSotW(w *wakeups, cutC chan struct{}, st *stream) error {
	ss := newSotWStream(st)
	return run(w, cutC, st, ss.onRequest, ss.onFleet, ss.onHeartbeat)
}

// close ends the stream with err, once: called with mu held, by whichever
// goroutine ends it, before its status goes out.
func (st *stream) close(err error) {
	if st.closing != nil {
		f := st.closing
		st.closing = nil
		f(err)
	}
}

// closed is the end of a stream that was served: what it holds is let go,
// and its end logged and reported.
func (st *stream) closed(err error) {
	st.wakeAt(time.Time{})
	if st.greetTimer != nil {
		st.greetTimer.Stop()
	}
	if st.leave != nil {
		st.leave()
	}
	var r *refusal
	if errors.As(err, &r) {
		st.refused(r)
	}
	if st.node != nil {
		detail := ""
		if err != nil {
			detail = err.Error()
		}
		// Logged before it is reported: whoever sees the event finds the
		// line written.
		st.logClosed(err)
		st.observe(&status.Event{Kind: status.StreamClosed, Detail: detail, Reason: st.closedReason(err)})
	}
}

// heartbeatInterval is how often TTL resources are refreshed on this
// stream: half the shortest TTL in its snapshot, or zero when the client
// does not support TTLs or nothing has one.
func (st *stream) heartbeatInterval() time.Duration {
	if !st.ttl || (!st.delta && !st.wrap) {
		return 0
	}
	return st.snapshot().MinTTL() / 2
}

// typeWatch is a type on a stream of either variant: its state, shared by
// both (TypeState), what make-before-break reads of it, and its status
// record.
type typeWatch interface {
	protocol.Holdings
	State() *protocol.TypeState
	rec() *liveType
}

// expect tells status which version the client should hold of typeURL, when
// that changes. With nothing pending for the type (its plan against the
// current snapshot sends nothing and holds nothing back), it is the version
// last sent: a change to names the client does not subscribe to leaves it
// up to date, as SYNCED means. With something pending it is the stream's
// own snapshot's version (its group's, less withheld Secrets), which the
// client lacks until the response that brings it there. The stream's plan
// decides this for free on every pass, in O(changes) through the shared
// transitions, and an event goes out only when the value changes: a
// publish that leaves a stream's types alone reports nothing.
func expect(st *stream, w *protocol.TypeState, live *liveType, typeURL, current string, pending bool) {
	v := current
	if sent := w.Version; !pending && sent != "" {
		v = sent
	}
	if w.Expected != v {
		w.Expected = v
		now := time.Now()
		st.synced(typeURL, st.live.expected(live, typeURL, v, current, now), now)
		if st.wants(status.ExpectedVersion) {
			st.observe(&status.Event{Kind: status.ExpectedVersion, TypeURL: typeURL, Version: v, SetVersion: current, At: now})
		}
	}
}

// pass brings the client toward the newest snapshot: every type in
// make-before-break order, skipping those whose set is unchanged and
// settled; push plans and sends one type.
func pass[W typeWatch](st *stream, watches *byType[W], push func(*protocol.Planner, W, *snapshot.Snapshot) error) error {
	snap := st.snapshot()
	if snap == nil {
		return nil
	}
	// The push functions keep p (the closure hides it from escape
	// analysis): lent from the server's pool rather than allocated, as a
	// publish makes a pass on every stream.
	p := st.srv.planners.Get().(*protocol.Planner)
	*p = st.planner()
	defer st.srv.putPlanner(p)
	for i, w := range watches.ws {
		ts := w.State()
		if !ts.Started {
			continue
		}
		url := watches.urls[i]
		version := snap.Set(url).Version()
		key := version
		if url == xdstype.VirtualHostURL {
			// What a VHDS alias is answered with reads the route
			// configurations' names too (aliasOf).
			key = protocol.ContentAt(snap.Set(url), snap.Set(xdstype.RouteURL))
		}
		settled := &ts.Settled
		if !st.holding && *settled != "" && *settled == key {
			continue
		}
		// Whether this type held anything back is its own: a flag another
		// type set earlier in the pass must not hide that this one holds
		// back for the same reason (it would be marked settled and its
		// client reported holding the version it lacks).
		before := p.ClearFlags()
		if err := push(p, w, snap); err != nil {
			st.logRejectedHolds(p)
			return err
		}
		*settled = ""
		if !p.MergeFlags(before) {
			*settled = key
		}
		expect(st, ts, w.rec(), url, version, *settled == "")
	}
	st.done(p, true)
	return nil
}

// useWatches makes the stream's make-before-break lookups read watches,
// falling back to the node's other per-type streams.
func useWatches[W typeWatch](st *stream, watches *byType[W]) {
	st.holdings = func(url string) protocol.Holdings {
		if w, ok := watches.get(url); ok && w.State().Started {
			return w
		}
		return st.others(url)
	}
}

// rankOf is t's place in the registry's make-before-break order.
func (s *Server) rankOf(t *xdstype.Type) int {
	return slices.Index(s.opts.Registry.Ranked(), t)
}

// open identifies the stream from a request, resolves the request's type
// and returns that type's watch, creating it. A zero watch with a nil error
// means the request is ignored.
func open[W typeWatch](st *stream, node *corev3.Node, typeURL string, watches *byType[W], create func(*xdstype.Type, *protocol.Sharing) W) (W, error) {
	var zero W
	if err := st.identify(node); err != nil {
		return zero, err
	}
	t, err := st.resolveType(typeURL)
	if err != nil || t == nil {
		return zero, err
	}
	w, ok := watches.get(t.URL)
	if !ok {
		w = create(t, st.srv.share)
		watches.put(t.URL, st.srv.rankOf(t), w)
		st.observe(&status.Event{Kind: status.Subscribed, TypeURL: t.URL})
	}
	return w, nil
}

// request answers a request from the newest fleet: a publish this stream has
// not handled yet is pushed first, then the request is answered.
func request[P any](st *stream, req P, onRequest func(P) error, onFleet func() error) error {
	if st.flooding(time.Now()) {
		return refuse(RefusedFlood, codes.ResourceExhausted, "more than %d requests a second on one stream", st.srv.opts.MaxRequestsPerSecond)
	}
	if st.node != nil {
		prev := st.fleet
		st.useFleet(st.srv.opts.Fleets.Current())
		if err := st.checkShard(); err != nil {
			return err
		}
		if st.fleet != prev {
			// A publish this stream has not pushed yet goes out first, so
			// that the answer to a request never overtakes changes
			// published before it: a client probing for quiet sees them.
			// One pass at most, so requests are not starved (X40).
			if err := onFleet(); err != nil {
				return err
			}
		}
	}
	if err := onRequest(req); err != nil {
		return err
	}
	if st.releaseAfter {
		st.releaseAfter = false
		return onFleet()
	}
	return nil
}

// identify takes the node from the stream's first request. The node is
// guaranteed only there (X3) and then identifies the stream for good,
// whatever later requests carry.
func (st *stream) identify(node *corev3.Node) error {
	if st.node != nil {
		return nil
	}
	st.firstCame()
	if node == nil {
		return grpcstatus.Error(codes.InvalidArgument, "the first request on a stream must carry node")
	}
	st.claimed = claimedNode(node)
	if err := st.checkNode(node); err != nil {
		return err
	}
	// What the stream keeps of the node: its group's terms, converted
	// once, and the fields reported; not the node as sent, whose
	// extensions and metadata run to kilobytes for every Envoy.
	mnode := fleet.NodeOf(node)
	mnode.Identities = st.ident.Names()
	f := st.srv.opts.Fleets.Current()
	var g *fleet.Group
	if f != nil {
		if g = f.GroupOf(mnode); g != nil && g.Unserved {
			return st.refuseShard(g, node.GetId())
		}
	}
	if err := st.srv.balanceAdmit(st); err != nil {
		return err
	}
	if err := st.srv.admission.Admit(st.gs.Context()); err != nil {
		return busy(err)
	}
	var release func()
	var subscribed Subscribed
	if admit := st.srv.opts.Admit; admit != nil {
		var err error
		if release, subscribed, err = admit(st.gs.Context(), mnode); err != nil {
			return err
		}
	}
	st.srv.open.identify(st.reg, release, subscribed)
	st.mnode = mnode
	st.node, st.claimed = keptNode(node), nil
	if st.typeURL != "" {
		st.boardKey = nodeBoardKey(node.GetId(), st.ident)
		st.leave = st.srv.board.join(st.boardKey, st.ev)
	}
	for _, f := range node.GetClientFeatures() {
		switch f {
		case "xds.config.supports-resource-ttl":
			st.ttl = true
		case "xds.config.supports-resource-in-sotw", "xds.config.resource-in-sotw":
			// Both spellings are in use: the first in Envoy's code, the
			// second in its client features documentation.
			st.wrap = true
		case protocol.ResourceErrorsFeature:
			st.told = protocol.NewTold()
		}
	}
	if cur := st.srv.opts.Fleets.Current(); cur != f {
		st.useFleet(cur) // published while the stream waited for admission
	} else if f != nil {
		st.place(f, g)
	}
	st.opened = time.Now()
	if st.live != nil {
		st.live.opened = st.opened
	}
	st.logOpened()
	st.observe(&status.Event{Kind: status.StreamOpened})
	return nil
}

// resolveType resolves a request's type. On ADS the type_url is required
// (X2); on a per-type stream it may be empty but must not name another type.
// A nil type with a nil error means the request is ignored.
func (st *stream) resolveType(url string) (*xdstype.Type, error) {
	if st.typeURL != "" {
		if url != "" && url != st.typeURL {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "type_url %q on a stream for %q", url, st.typeURL)
		}
		return st.srv.opts.Registry.Lookup(st.typeURL), nil
	}
	if url == "" {
		return nil, grpcstatus.Error(codes.InvalidArgument, "every request on an aggregated (ADS) stream must carry type_url")
	}
	t := st.srv.opts.Registry.Lookup(url)
	if t == nil || (!st.delta && t.SotWMethod == "") || (st.delta && t.DeltaMethod == "") {
		// Logged once a stream, counted every time: a client sending
		// thousands of made-up type URLs must not grow the log by each.
		if !st.unknownLogged {
			st.unknownLogged = true
			st.log().Warn("ignoring requests for a type Pylon does not serve on this kind of stream; later ones on this stream are only counted", "type_url", bounded(url, maxLogged), "delta", st.delta)
		}
		st.observe(&status.Event{Kind: status.RequestIgnored, Reason: IgnoredUnknownType})
		return nil, nil
	}
	return t, nil
}

func (st *stream) nextNonce() string {
	st.nonces++
	return strconv.FormatUint(st.nonces, 10)
}

// useFleet makes f the fleet the stream serves from and resolves the node's
// group in it: a config change can move a node to another group, whose
// snapshot the planner then brings the client to like any other change.
func (st *stream) useFleet(f *fleet.Fleet) {
	if f == nil || f == st.fleet {
		return
	}
	st.place(f, f.GroupOf(st.mnode))
}

// place makes f the stream's fleet and g, the node's group in it, its
// group.
func (st *stream) place(f *fleet.Fleet, g *fleet.Group) {
	st.fleet = f
	switch {
	case g == nil && (st.group != nil || !st.noGroupLogged):
		// The classic silent failure: a proxy that connects fine and gets
		// nothing. Say it loudly, once per node and config.
		st.noGroupLogged = true
		if st.srv.logged.first(onceKey("nogroup", st.node.GetId(), f.Version())) {
			st.log().Warn("node matches no group: it receives nothing until a group takes it", "cluster", st.node.GetCluster())
		}
		st.observe(&status.Event{Kind: status.NoMatchingGroup})
	case g != nil && (st.group == nil || st.group.Name != g.Name):
		if st.debugging() {
			st.log().Debug("node group", "group", g.Name)
		}
	}
	if (st.group == nil) != (g == nil) || g != nil && st.group.Name != g.Name {
		// Told only when it changes: the stream's status is memory of
		// its own, and every publish comes here for every stream.
		st.live.setGroup(g)
		now := time.Now()
		for _, f := range st.live.regrouped(now) {
			st.synced(f.url, f.d, now)
		}
	}
	st.group = g
	var why string
	st.entitled = st.entitlement(f, g)
	st.withheld = nil
	if st.entitled != nil {
		st.withheld, why = st.entitled.w, st.entitled.why
	}
	st.logWithheld(st.withheld, why)
}

// snapshot is what the stream's node should run, nil when it is in no
// group: its group's, less the Secrets it may not have.
func (st *stream) snapshot() *snapshot.Snapshot {
	switch {
	case st.group == nil:
		return nil
	case st.withheld != nil:
		return st.withheld.snap
	}
	return st.group.Snapshot
}

// notFound reports whether delta streams report subscribed names that do
// not exist (X33): yes unless the server or the node's group says no.
func (st *stream) notFound() bool {
	return !st.srv.opts.SuppressDeltaNotFound && (st.group == nil || !st.group.SuppressDeltaNotFound)
}

// send writes a response and returns its encoded size. A type's first
// response on a stream is the full-state one a reconnect storm multiplies:
// it takes an admission token.
//
// Every send is watched: one that outlives MaxSlotHold gives its
// admission token back, and one that outlives three times SendStall gets
// the stream's connection closed (guard.SendWatch).
func (st *stream) send(msg any, first bool) (int, error) {
	if ev := st.ev; ev != nil && ev.onPool {
		// A drainer: another moves the queue while this one waits.
		ev.pool.mayBlock()
		defer ev.pool.unblocked()
	}
	var release func()
	if first {
		var err error
		if release, err = st.srv.admission.Acquire(st.gs.Context()); err != nil {
			return 0, busy(err)
		}
	}
	st.watch.Begin(release)
	err := st.gs.SendMsg(msg)
	if st.watch.End() {
		return 0, refuse(RefusedStalled, codes.Unavailable, "a response stayed unsent for %s because the client does not read it; its connection was closed", st.srv.evictAfter)
	}
	if err != nil {
		return 0, err
	}
	// A shared body's size is known; only a one-off message is measured.
	switch m := msg.(type) {
	case *wire.Encoded:
		return m.Size(), nil
	case proto.Message:
		return proto.Size(m), nil
	}
	return 0, nil
}

// observing reports whether anyone receives stream events, so per-push
// work that only feeds them (the list of sent resources) can be skipped.
func (st *stream) observing() bool {
	_, nop := st.srv.obs.(nopObserver)
	return !nop
}

// flooding counts a request and reports whether the stream sends more than
// the server accepts per second: a broken or hostile client.
func (st *stream) flooding(now time.Time) bool {
	limit := st.srv.opts.MaxRequestsPerSecond
	if limit < 0 {
		return false
	}
	if at := int64(now.Sub(st.srv.epoch)); at-st.windowStart >= int64(time.Second) || st.windowCount == 0 {
		st.windowStart, st.windowCount = at, 0
	}
	if st.windowCount < math.MaxInt32 { // a flood of any length cannot wrap it
		st.windowCount++
	}
	return int(st.windowCount) > limit
}

// observe fills in the stream's fields and reports e (Server.report: e
// stays on its caller's stack). An At already set is kept: the time the
// stream's status took for the same thing.
func (st *stream) observe(e *status.Event) {
	e.StreamID, e.ADS, e.Delta, e.Peer, e.Poll = st.id, st.typeURL == "", st.delta, st.conn.Remote, st.quiet
	if e.At.IsZero() {
		e.At = time.Now()
	}
	// Interfaces: a nil pointer in one would not be nil.
	if st.live != nil { // nil without an observer's status
		e.Status = st.live
	}
	switch {
	case st.node != nil:
		e.Node, e.Member = st.node, &st.mnode
	case st.claimed != nil:
		e.Node = st.claimed
	}
	// Versions and nonces of requests are the client's strings.
	e.Version, e.Nonce = bounded(e.Version, maxLogged), bounded(e.Nonce, maxLogged)
	if st.ident.Verified() {
		e.Identity = st.ident.String()
	}
	if st.group != nil {
		e.Group = st.group.Name
	}
	st.srv.report(e)
}

// subscribed reports the stream's subscription to a full-state type
// (Listener, Cluster, scopes) when it is not the one last reported
// (*last): status compares what such a proxy holds with what it asked
// for, by name or everything its group has. The per-resource types are
// not reported: a response of theirs carries what changed, never the
// whole set, so nothing is compared, and an Envoy's assignments by name
// would cost every stream a list.
func (st *stream) subscribed(t *xdstype.Type, sub *protocol.Subscription, last **protocol.Subscription) {
	if !t.FullState || sub == nil || sub == *last {
		return
	}
	*last = sub
	st.observe(&status.Event{Kind: status.SubscriptionChanged, TypeURL: t.URL, Wildcard: sub.Wildcard, Names: sub.SortedNames()})
}

// onNACK reports a rejected response; the log line comes once per type and
// rejected version. The version is not sent again (X12): the proxy keeps
// running what it had until the config changes. running is the version the
// proxy last ACKed of the type on this stream, as the server recorded it
// (not what the request claims, and known in delta too); "" for none.
func (st *stream) onNACK(t *xdstype.Type, rec *liveType, rejected, running, nonce, msg string) {
	// The proxy's text may quote what it failed to load, a private key
	// included: redacted here, so the log, the event and every view of
	// it (status, /proxies, CSDS) get the same redacted text.
	msg = redact.String(bounded(msg, maxDetail))
	// Logged before it is reported: whoever sees the event finds the line.
	if st.srv.logged.first(onceKey("nack", st.node.GetId(), t.URL, rejected)) {
		if running == "" {
			running = "none"
		}
		st.log().Warn("proxy rejected config", "type", t.Abbrev, "rejected_version", rejected, "running_version", running, "error_detail", msg)
	}
	now := time.Now()
	st.live.nacked(rec, t.URL, now)
	st.observe(&status.Event{Kind: status.RequestNACK, TypeURL: t.URL, Version: rejected, Nonce: nonce, Detail: msg, At: now})
}
