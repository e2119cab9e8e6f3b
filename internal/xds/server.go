// Package xds is Pylon's xDS protocol server.
//
// It serves the aggregated stream (ADS) and one service per resource type,
// registered from the xdstype registry, so a new type needs no change here.
// Each stream has one goroutine blocked in Recv and one loop that owns the
// stream's state, answers requests before pushes, and reads the newest Fleet
// when woken, skipping versions it was too slow to send.
package xds

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Fleets is where the server reads what to serve.
type Fleets interface {
	// Current returns the newest fleet, or nil before the first publish.
	Current() *snapshot.Fleet
	// Subscribe returns a channel woken after each publish and a cancel func.
	Subscribe() (<-chan struct{}, func())
}

// Options configures a Server.
type Options struct {
	Registry *xdstype.Registry
	Fleets   Fleets
	// Identifier is sent as control_plane.identifier in every response, so an
	// operator can tell which replica answered (X9).
	Identifier string
	Logger     *slog.Logger
	// Observer, if set, receives stream events for status tracking.
	Observer Observer
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
	// MaxInitialSends bounds the streams sending their first, full-state
	// responses at once (default 64; negative: no bound). NewStreamsPerSecond
	// bounds new streams (default 0: no bound). Waiting streams give up with
	// RESOURCE_EXHAUSTED after AdmissionWait (default 10s, under the
	// clients' 15s does-not-exist timer).
	MaxInitialSends     int
	NewStreamsPerSecond float64
	AdmissionWait       time.Duration
	// MaxRequestsPerSecond cuts off a stream flooding the server with
	// requests (default 10,000 a second; negative: no limit).
	MaxRequestsPerSecond int
}

// Server serves xDS over gRPC.
type Server struct {
	opts        Options
	cp          *corev3.ControlPlane
	log         *slog.Logger
	obs         Observer
	holdTimeout time.Duration
	admission   *admission
	bodies      bodies
	// subs and canons are the subscriptions and held contents that streams
	// in the same state share (shared.go).
	subs   *subscriptions
	canons weakCache[canonKey, canon]
	board  *board
	logged *onceSet // log lines already written, by node and subject
	// life ends every stream when cancelled by Shutdown.
	life context.Context
	stop context.CancelFunc
	ids  atomic.Uint64
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
	return &Server{
		holdTimeout: hold,
		admission:   newAdmission(opts.MaxInitialSends, opts.NewStreamsPerSecond, opts.AdmissionWait),
		board:       newBoard(),
		subs:        newSubscriptions(),
		logged:      newOnceSet(4096),
		opts:        opts,
		cp:          &corev3.ControlPlane{Identifier: opts.Identifier},
		log:         log,
		obs:         obs,
		life:        life,
		stop:        stop,
	}
}

// InitialSendsPeak is the most streams seen sending their first responses
// at once: the admission bound at work.
func (s *Server) InitialSendsPeak() int64 { return s.admission.peak.Load() }

// Shutdown ends every open stream with UNAVAILABLE so that a graceful gRPC
// stop can complete; clients reconnect to another replica or retry.
func (s *Server) Shutdown() { s.stop() }

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

// streamContext ends when the client goes away or the server shuts down.
func (s *Server) streamContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	unhook := context.AfterFunc(s.life, cancel)
	return ctx, func() { unhook(); cancel() }
}
