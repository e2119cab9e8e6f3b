// Package csds serves the Client Status Discovery Service
// (envoy.service.status.v3) on the xDS port, so standard tools (grpcdebug,
// Envoy's and Istio's tooling) can read, per proxy, which version of each
// resource type it was sent, whether it ACKed or NACKed it, and the
// resources themselves, redacted.
//
// The source of truth is the status tracker: what the server sent each
// stream and what the stream answered. Nothing here reads the store or the
// model. Every resource shown goes through redact.Message, every NACK detail
// through redact.String, so key material never leaves; and every call must
// pass Options.Authorize (see TokenOrIdentity), because whoever reaches the
// xDS port would otherwise read every proxy's configuration.
package csds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Defaults of the bounds in Options.
const (
	DefaultMaxNodes          = 1000
	DefaultRequestsPerSecond = 2
	DefaultMaxConcurrent     = 4
	// DefaultMaxBytes stays under the 4 MiB that gRPC clients (grpcurl,
	// grpcdebug) accept by default, with room for one more node.
	DefaultMaxBytes = 3 << 20
)

// Bounds of the log lines callers can cause (refusals, cut answers):
// anyone reaching the port can be refused in a loop.
const (
	logsPerSecond = 1
	logsBurst     = 5
)

// maxMatchers bounds the node matchers of one request: each is tried on
// every node, so their count multiplies the cost of an answer.
const maxMatchers = 16

// OmittedHeader is the trailer (FetchClientStatus) or header of the next
// response (StreamClientStatus) that says how many matching nodes an answer
// left out because of MaxNodes; CSDS has no field for it.
const OmittedHeader = "pylon-csds-omitted-nodes"

// Options configures a Server.
type Options struct {
	// Tracker is where streams and their per-type state are read.
	Tracker *status.Tracker
	// Registry maps the tracker's type names back to type URLs.
	Registry *xdstype.Registry
	// Authorize decides whether a call may read the fleet's status; a
	// non-nil error is returned to the caller as is (use a gRPC status
	// error). Required: New panics without it, since an open CSDS would
	// hand every proxy's configuration to anyone reaching the xDS port.
	Authorize func(ctx context.Context) error
	Logger    *slog.Logger
	// MaxNodes bounds the nodes in one response (default 1000); the rest
	// are left out and counted in OmittedHeader. Ask with node matchers.
	MaxNodes int
	// MaxBytes bounds a response's encoded size (default 3 MiB): once the
	// nodes in it reach this, no further node is added and the rest are
	// counted in OmittedHeader. A first node larger than it is still sent
	// alone, or it could never be read.
	MaxBytes int
	// RequestsPerSecond bounds each StreamClientStatus stream's requests
	// (default 2, burst of the same); past it the stream's requests wait.
	RequestsPerSecond float64
	// MaxConcurrent bounds the answers computed at once across all calls
	// (default 4): each one copies the tracker's streams.
	MaxConcurrent int
}

// Server is the CSDS service.
type Server struct {
	statusv3.UnimplementedClientStatusDiscoveryServiceServer
	o     Options
	urls  map[string]string // tracker type name ("CDS") -> type URL
	slots chan struct{}
	// logs bounds the log lines callers can cause.
	logs *rate.Limiter
	// redacted holds resources already redacted and packed, so that a
	// resource sent to many proxies is redacted once, not once per node
	// per call.
	redacted *anyCache
}

// New returns a CSDS server. It panics without Tracker, Registry or
// Authorize: wiring errors, not runtime conditions.
func New(o Options) *Server {
	if o.Tracker == nil || o.Registry == nil || o.Authorize == nil {
		panic("csds: Options need Tracker, Registry and Authorize")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxNodes <= 0 {
		o.MaxNodes = DefaultMaxNodes
	}
	if o.RequestsPerSecond <= 0 {
		o.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	urls := map[string]string{}
	for _, t := range o.Registry.Ranked() {
		urls[t.Abbrev] = t.URL
		urls[t.URL] = t.URL
	}
	return &Server{
		o: o, urls: urls, slots: make(chan struct{}, o.MaxConcurrent),
		logs:     rate.NewLimiter(logsPerSecond, logsBurst),
		redacted: newAnyCache(maxCachedResources),
	}
}

// Register adds the service to g (the xDS server's gRPC server).
func (s *Server) Register(g *grpc.Server) {
	statusv3.RegisterClientStatusDiscoveryServiceServer(g, s)
}

// FetchClientStatus answers one request.
func (s *Server) FetchClientStatus(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	if err := s.o.Authorize(ctx); err != nil {
		s.refused("FetchClientStatus", err)
		return nil, err
	}
	resp, omitted, err := s.answer(ctx, req)
	if err != nil {
		return nil, err
	}
	if omitted > 0 {
		_ = grpc.SetTrailer(ctx, omittedMD(omitted))
	}
	return resp, nil
}

// StreamClientStatus answers each request of the stream, at most
// RequestsPerSecond of them.
func (s *Server) StreamClientStatus(stream grpc.BidiStreamingServer[statusv3.ClientStatusRequest, statusv3.ClientStatusResponse]) error {
	ctx := stream.Context()
	if err := s.o.Authorize(ctx); err != nil {
		s.refused("StreamClientStatus", err)
		return err
	}
	limit := rate.NewLimiter(rate.Limit(s.o.RequestsPerSecond), max(1, int(s.o.RequestsPerSecond)))
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := limit.Wait(ctx); err != nil {
			return grpcstatus.FromContextError(ctx.Err()).Err()
		}
		resp, omitted, err := s.answer(ctx, req)
		if err != nil {
			return err
		}
		if omitted > 0 {
			// Headers go once, before the first message; later
			// truncations are in the log only.
			_ = stream.SetHeader(omittedMD(omitted))
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// answer validates req and builds its response, waiting for a slot among
// MaxConcurrent.
func (s *Server) answer(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, int, error) {
	m, err := s.matcher(req)
	if err != nil {
		return nil, 0, err
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, grpcstatus.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-s.slots }()
	resp, omitted := s.build(s.o.Tracker.Streams(), m, !req.GetExcludeResourceContents())
	if omitted > 0 && s.logs.Allow() {
		s.o.Logger.Info("CSDS answer cut at the node or size bound", "max_nodes", s.o.MaxNodes, "max_bytes", s.o.MaxBytes, "omitted", omitted)
	}
	return resp, omitted, nil
}

// refused logs a refused call, at most about once a second after a burst.
func (s *Server) refused(method string, err error) {
	if s.logs.Allow() {
		s.o.Logger.Info("CSDS call refused", "method", method, "error", err)
	}
}

func omittedMD(n int) metadata.MD {
	return metadata.Pairs(OmittedHeader, strconv.Itoa(n))
}

// invalid is an InvalidArgument naming the request field.
func invalid(field, msg string) error {
	return grpcstatus.Errorf(codes.InvalidArgument, "CSDS request: %s: %s", field, msg)
}
