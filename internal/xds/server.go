// Package xds is Pylon's xDS protocol server.
//
// It serves the aggregated stream (ADS) and one service per resource type,
// registered from the xdstype registry, so a new type needs no change here.
// Each stream keeps one goroutine, gRPC's handler, which reads requests and
// answers each; a publish, or a timer of the stream, wakes it: one of a few
// server-wide goroutines (drainers.go) pushes the newest Fleet, skipping
// versions it was too slow to send (wakeups.go). Both hold the stream's
// mutex, so its state has one owner at a time and its sends stay in order.
//
// This package is the stream shell: gRPC, the streams' lifetimes, sends,
// bounds, logs and status. What a request means and what the next response
// carries are decided by the protocol core (package protocol), as pure
// values; a stream carries its decisions out.
package xds

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/protocol"
	"github.com/pylon-xds/pylon/internal/xds/wire"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Fleets is where the server reads what to serve.
type Fleets interface {
	// Current returns the newest fleet, or nil before the first publish.
	Current() *fleet.Fleet
	// Notify calls f after each publish until the returned func is
	// called; f must return at once (fleet.Publisher's Notify). A
	// callback rather than a channel spares each stream a goroutine
	// waiting on one.
	Notify(f func()) func()
}

// Subscribed is told a stream's subscription to a per-resource type
// (Options.Admit): everything of it (wildcard) and the names. An alias,
// so that a package below this one (a relay) can return one.
type Subscribed = func(typeURL string, wildcard bool, names []string)

// Options configures a Server.
type Options struct {
	Registry *xdstype.Registry
	Fleets   Fleets
	// Identifier is sent as control_plane.identifier in every response, so an
	// operator can tell which replica answered (X9).
	Identifier string
	Logger     *slog.Logger
	// Observer, if set, receives stream events for status tracking.
	Observer status.Observer
	// SuppressDeltaNotFound stops delta streams from listing subscribed
	// names that do not exist in removed_resources (X33). The specification
	// says to list them, and current Envoy and gRPC keep the subscription
	// when they are; very old Envoys took it as an unsubscription.
	SuppressDeltaNotFound bool
	// HoldTimeout bounds how long an ADS stream holds back a resource until
	// the client ACKs what it names (make-before-break), so a client that
	// does not ACK cannot stall its stream. Default 15s, Envoy's initial
	// fetch timeout.
	HoldTimeout time.Duration
	// MaxInitialSends bounds the initial-send slots: a stream takes one to
	// send its first, full-state response of a type (default 64; negative:
	// no bound). A send keeps its slot at most MaxSlotHold, then gives it
	// back even if it is still blocked on a client that does not read, so
	// with the default 1s this bounds the initial sends started per second
	// rather than those in flight. NewStreamsPerSecond
	// bounds new streams (default 0: no bound). Waiting streams give up with
	// RESOURCE_EXHAUSTED after AdmissionWait (default 10s, under the
	// clients' 15s does-not-exist timer).
	MaxInitialSends     int
	NewStreamsPerSecond float64
	AdmissionWait       time.Duration
	// MaxRequestsPerSecond cuts off a stream flooding the server with
	// requests (default 10,000 a second; negative: no limit).
	MaxRequestsPerSecond int

	// Identity, if set, binds node ids to client certificates: a stream
	// whose connection has a verified client certificate must claim a node
	// that certificate proves, or it ends with PERMISSION_DENIED. A
	// connection without one may claim any node, but gets no Secrets
	// (unless InsecureServeSecrets) and joins no group that declares
	// identities; to refuse such connections, require client certificates
	// in the TLS layer. Nil: node ids are not bound to certificates (the
	// certificate's identity still decides groups and Secrets).
	Identity *identity.Rule
	// Admit, if set, takes each stream whose node passed every check
	// (identity, bounds, shard, balance, admission) before it is served,
	// and may refuse it with a gRPC status error; release runs when the
	// stream ends. A relay starts a key's upstream stream here: only a
	// node the server accepts may make it fetch anything. ctx ends with
	// the stream (its client gone, the server stopping).
	//
	// subscribed, if Admit returns one, is told the stream's subscription
	// to each per-resource type (not FullState: routes, endpoints, VHDS,
	// ...) whenever a request changes it, before the request is applied:
	// a relay subscribes upstream to what its proxies ask for, and may
	// wait (bounded) for it to arrive; the request is then answered from
	// the fleet current once it returns, a publish meanwhile pushed first.
	// names are sorted, without "*", and must not be modified. Without it
	// (serve) a stream keeps no list of its own for this.
	Admit func(ctx context.Context, n nodegroup.Node) (release func(), subscribed Subscribed, err error)
	// InsecureServeSecrets serves Secrets over connections without a
	// verified client certificate (off by default: such streams get every
	// resource but the Secrets). The secret policy still applies.
	InsecureServeSecrets bool
	// MaxResourceNames bounds the names in one request (resource_names;
	// delta's subscribe, unsubscribe and initial_resource_versions, and
	// what a delta stream subscribes to by name per type); default 10,000.
	// A request over it ends the stream with RESOURCE_EXHAUSTED.
	MaxResourceNames int
	// MaxStreamsPerConnection bounds concurrent streams on one connection
	// (gRPC's MaxConcurrentStreams, in GRPCOptions); default 100.
	MaxStreamsPerConnection uint32
	// SendStall bounds a send to a client that does not read: past it, the
	// send gives its initial-send slot back (sooner: see MaxSlotHold);
	// past three times it, the stream's connection is closed (if served on
	// Listener) and the stream ends as refused. It also bounds each socket
	// write of Listener's connections (at three times). Default 10s.
	SendStall time.Duration
	// MaxSlotHold is the longest a send keeps its initial-send slot
	// (default 1s, at most SendStall). A send blocked on a client that
	// does not read costs nothing while it waits (its bytes are encoded
	// and shared), so it need not keep others waiting: with the default,
	// N such streams delay a new proxy by about N/MaxInitialSends seconds,
	// where SendStall alone would make it N/MaxInitialSends x SendStall,
	// past AdmissionWait as soon as N exceeds MaxInitialSends.
	MaxSlotHold time.Duration
	// FirstRequestTimeout bounds the wait for a stream's first request
	// (default 30s): a stream that sends none holds a goroutine and
	// memory, yet passes no admission and counts toward no balance, so
	// past it the stream ends as refused (RefusedNoRequest).
	FirstRequestTimeout time.Duration
	// Balance, if set, spreads the streams over the replicas of this
	// replica's shard (balance.go); run Server.Balance to shed.
	Balance *Balance
	// Shard, if set, names the replicas serving the groups this one does
	// not (shard.go), in the refusal of their nodes.
	Shard *Shard
}

// maxRecvMsgSize bounds one request: ten thousand names of a hundred
// bytes fit well, and a client cannot make the server buffer more.
const maxRecvMsgSize = 4 << 20

// Server serves xDS over gRPC.
type Server struct {
	opts Options
	cp   *corev3.ControlPlane
	log  *slog.Logger
	obs  status.Observer
	// sel is obs when it is Selective, else nil.
	sel status.Selective
	// events are the Events lent to obs (stream.observe, report).
	events sync.Pool
	// planners are the planners lent to passes (pass).
	planners sync.Pool
	// epoch is when the server was made: streams keep times as
	// nanoseconds since (a word each, not a time.Time's three).
	epoch     time.Time
	admission *guard.Admission
	drainers  *drainers
	fanout    connFanout
	// enc makes whole-set responses one encoding for every stream.
	enc wire.Encoder
	// share is what streams in the same state share (protocol.Sharing); plan
	// what their planners plan with.
	share  *protocol.Sharing
	plan   protocol.PlanConfig
	board  *board
	logged *onceSet // log lines already written, by node and subject
	// withheldSnaps are the group snapshots less the Secrets some streams
	// may not have, shared by the streams with the same entitlement.
	withheldSnaps protocol.WeakCache[withheldKey, withheld]
	// entitlements are what each identity may have of each group
	// snapshot, worked out once per fleet (entitle.go).
	entitlements protocol.WeakCache[entitledKey, entitled]
	// conns are the connections accepted by Listener; slotHold and
	// evictAfter bound sends (guard.SendWatch).
	conns                guard.Conns
	slotHold, evictAfter time.Duration
	// life ends every stream when cancelled by Shutdown.
	life context.Context
	stop context.CancelFunc
	ids  atomic.Uint64
	// draining is set by Drain; open are the open streams it ends, and
	// drainClock, when a test sets it, replaces time in Drain's schedule
	// (a channel firing at an offset from the drain's start).
	draining   atomic.Bool
	open       openStreams
	drainClock func(offset time.Duration) <-chan time.Time
}

// New returns a server.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	obs := opts.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	life, stop := context.WithCancel(context.Background())
	hold := opts.HoldTimeout
	if hold <= 0 {
		hold = 15 * time.Second
	}
	if opts.MaxInitialSends == 0 {
		opts.MaxInitialSends = 64
	}
	if opts.AdmissionWait <= 0 {
		opts.AdmissionWait = 10 * time.Second
	}
	if opts.MaxRequestsPerSecond == 0 {
		opts.MaxRequestsPerSecond = 10000
	}
	if opts.MaxResourceNames <= 0 {
		opts.MaxResourceNames = 10000
	}
	if opts.MaxStreamsPerConnection == 0 {
		opts.MaxStreamsPerConnection = 100
	}
	if opts.SendStall <= 0 {
		opts.SendStall = 10 * time.Second
	}
	if opts.MaxSlotHold <= 0 {
		opts.MaxSlotHold = time.Second
	}
	opts.MaxSlotHold = min(opts.MaxSlotHold, opts.SendStall)
	if opts.FirstRequestTimeout <= 0 {
		opts.FirstRequestTimeout = 30 * time.Second
	}
	cp := &corev3.ControlPlane{Identifier: opts.Identifier}
	sel, _ := obs.(status.Selective)
	share := protocol.NewSharing()
	var ranked []*xdstype.Type
	if opts.Registry != nil {
		ranked = opts.Registry.Ranked()
	}
	s := &Server{
		slotHold:   opts.MaxSlotHold,
		evictAfter: 3 * opts.SendStall,
		admission:  guard.NewAdmission(opts.MaxInitialSends, opts.NewStreamsPerSecond, opts.AdmissionWait),
		drainers:   newDrainers(2 * runtime.GOMAXPROCS(0)),
		fanout:     connFanout{fleets: opts.Fleets},
		board:      newBoard(),
		share:      share,
		plan:       protocol.NewPlanConfig(ranked, share, hold),
		logged:     newOnceSet(4096, log),
		opts:       opts,
		cp:         cp,
		log:        log,
		obs:        obs,
		sel:        sel,
		events:     sync.Pool{New: func() any { return new(status.Event) }},
		planners:   sync.Pool{New: func() any { return new(protocol.Planner) }},
		epoch:      time.Now(),
		life:       life,
		stop:       stop,
	}
	s.enc.Init(cp)
	return s
}

// InitialSendsPeak is the most initial-send slots seen held at once: the
// admission bound at work. A send that outlives MaxSlotHold has given its
// slot back and is no longer counted, so more first responses than this
// may be in flight.
func (s *Server) InitialSendsPeak() int64 { return s.admission.Peak() }

// GRPCOptions are the gRPC server options the xDS server wants: the codec
// that shares encoded responses between streams (wire.ServerOptions), a bound
// on concurrent streams per connection and on the size of a request. The
// daemon adds keepalive and transport credentials.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	return append(wire.ServerOptions(),
		grpc.MaxConcurrentStreams(s.opts.MaxStreamsPerConnection),
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
	)
}

// Listener wraps the xDS listener: the server tracks its connections, so
// that it can close the connection of a stream whose sends stay blocked,
// and bounds each write to their sockets. It logs and reports
// (ConnectionClosed) how each connection ends, and each stream gRPC
// refuses on one (TransportRefused). Serve gRPC on it.
func (s *Server) Listener(l net.Listener) net.Listener {
	return s.conns.Listener(l, s.evictAfter, connReports{s})
}

// evict closes the connection of a stream whose send stayed blocked past
// the bound. Only a connection accepted through Listener can be closed:
// gRPC gives a handler no way to abort its own blocked SendMsg (cancelling
// the stream's context is the transport's, not the handler's), so without
// Listener the send stays blocked until the client reads or the connection
// dies, and this only warns, once.
func (s *Server) evict(k guard.Key) {
	if s.conns.Evict(k) {
		return
	}
	if s.logged.first("evict-untracked") {
		s.log.Warn("a stream's send is stuck but its connection cannot be closed: serve gRPC on Server.Listener so stalled clients can be evicted", "peer", k.Remote)
	}
}

// report lends e to the observer through a pooled copy, as
// stream.observe does: e stays on its caller's stack.
func (s *Server) report(in *status.Event) {
	e := s.events.Get().(*status.Event)
	*e = *in
	s.obs.Observe(e)
	*e = status.Event{} // what it references is not kept alive by the pool
	s.events.Put(e)
}

// Shutdown ends every open stream with UNAVAILABLE so that a graceful gRPC
// stop can complete; clients reconnect to another replica or retry.
func (s *Server) Shutdown() {
	s.stop()
	s.open.endAll(context.Canceled)
}

// handlerType satisfies grpc's check that a service implementation has the
// service's interface: the descriptors below are built from the registry
// rather than from generated stubs, so any value will do.
type handlerType interface{}

// Register adds ADS and every per-type discovery service to g.
func (s *Server) Register(g *grpc.Server) {
	ads := &grpc.ServiceDesc{
		ServiceName: "envoy.service.discovery.v3.AggregatedDiscoveryService",
		HandlerType: (*handlerType)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "StreamAggregatedResources", Handler: s.sotwHandler(""), ServerStreams: true, ClientStreams: true},
			{StreamName: "DeltaAggregatedResources", Handler: s.deltaHandler(""), ServerStreams: true, ClientStreams: true},
		},
		Metadata: "envoy/service/discovery/v3/ads.proto",
	}
	g.RegisterService(ads, s)

	// Several types share one service (RDS, SRDS and VHDS are all in
	// envoy.service.route.v3 but in distinct services), so group by name.
	services := map[string]*grpc.ServiceDesc{}
	var order []string
	for _, t := range s.opts.Registry.Ranked() {
		desc := services[t.Service]
		if desc == nil {
			desc = &grpc.ServiceDesc{ServiceName: t.Service, HandlerType: (*handlerType)(nil)}
			services[t.Service] = desc
			order = append(order, t.Service)
		}
		if t.SotWMethod != "" {
			desc.Streams = append(desc.Streams, grpc.StreamDesc{StreamName: t.SotWMethod, Handler: s.sotwHandler(t.URL), ServerStreams: true, ClientStreams: true})
		}
		if t.DeltaMethod != "" {
			desc.Streams = append(desc.Streams, grpc.StreamDesc{StreamName: t.DeltaMethod, Handler: s.deltaHandler(t.URL), ServerStreams: true, ClientStreams: true})
		}
	}
	for _, name := range order {
		g.RegisterService(services[name], s)
	}
}

func (s *Server) sotwHandler(typeURL string) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		return s.serve(stream, typeURL, false)
	}
}

func (s *Server) deltaHandler(typeURL string) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		return s.serve(stream, typeURL, true)
	}
}
