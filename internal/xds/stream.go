package xds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// sotwStream is one state-of-the-world stream: ADS when typeURL is empty,
// otherwise a per-type stream.
type sotwStream struct {
	srv     *Server
	grpc    grpc.ServerStream
	id      uint64
	typeURL string // "" on ADS
	log     *slog.Logger

	node    *corev3.Node
	fleet   *snapshot.Fleet
	watches map[string]*watch
	nonces  uint64
	// unknown remembers type URLs already logged as not served (X2).
	unknown map[string]bool
	// nacks remembers the (type, version) pairs already logged as NACKed,
	// so a client repeating a NACK does not flood the log.
	nacks map[[2]string]bool
}

func (s *Server) serveSotW(gs grpc.ServerStream, typeURL string) error {
	ctx, cancel := s.streamContext(gs.Context())
	defer cancel()

	st := &sotwStream{
		srv:     s,
		grpc:    gs,
		id:      s.ids.Add(1),
		typeURL: typeURL,
		watches: map[string]*watch{},
		unknown: map[string]bool{},
		nacks:   map[[2]string]bool{},
	}
	st.log = s.log.With("stream", st.id)

	reqs := make(chan *discoveryv3.DiscoveryRequest)
	recvErr := make(chan error, 1)
	go func() {
		// The only goroutine reading the stream. It ends when RecvMsg fails,
		// which it does once the handler returns.
		for {
			req := &discoveryv3.DiscoveryRequest{}
			if err := gs.RecvMsg(req); err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()

	notify, unsubscribe := s.opts.Fleets.Subscribe()
	defer unsubscribe()

	err := st.loop(ctx, reqs, recvErr, notify)
	if st.node != nil {
		detail := ""
		if err != nil {
			detail = err.Error()
		}
		s.obs.Observe(Event{Kind: StreamClosed, StreamID: st.id, Node: st.node, ADS: typeURL == "", Detail: detail, At: time.Now()})
	}
	return err
}

func (st *sotwStream) loop(ctx context.Context, reqs <-chan *discoveryv3.DiscoveryRequest, recvErr <-chan error, notify <-chan struct{}) error {
	for {
		// Requests come before pushes so that no request waits behind a
		// stream of updates (X40).
		select {
		case req := <-reqs:
			if err := st.onRequest(req); err != nil {
				return err
			}
			continue
		default:
		}
		select {
		case req := <-reqs:
			if err := st.onRequest(req); err != nil {
				return err
			}
		case <-notify:
			if err := st.onFleet(); err != nil {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-ctx.Done():
			if st.srv.life.Err() != nil {
				return status.Error(codes.Unavailable, "pylon is shutting down")
			}
			return ctx.Err()
		}
	}
}

func (st *sotwStream) onRequest(req *discoveryv3.DiscoveryRequest) error {
	if st.node == nil {
		// The node is guaranteed only on the first request (X3); it then
		// identifies the stream for good, whatever later requests carry.
		if req.GetNode() == nil {
			return status.Error(codes.InvalidArgument, "the first request on a stream must carry node")
		}
		st.node = req.GetNode()
		st.log = st.log.With("node", st.node.GetId())
		st.srv.obs.Observe(Event{Kind: StreamOpened, StreamID: st.id, Node: st.node, ADS: st.typeURL == "", At: time.Now()})
		st.log.Debug("stream opened", "ads", st.typeURL == "", "type", st.typeURL)
	}
	t, err := st.requestType(req)
	if err != nil || t == nil {
		return err
	}
	if st.fleet == nil {
		st.fleet = st.srv.opts.Fleets.Current()
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
		st.srv.obs.Observe(Event{Kind: RequestACK, StreamID: st.id, Node: st.node, ADS: st.typeURL == "", TypeURL: t.URL, Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(), At: time.Now()})
	case reqNACK:
		st.onNACK(t, req)
	}
	if owe && snap != nil {
		return st.send(w, snap)
	}
	return nil
}

// requestType resolves the request's type. On ADS the type_url is required
// (X2); on a per-type stream it may be empty but must not name another type.
// A nil type with a nil error means the request is ignored.
func (st *sotwStream) requestType(req *discoveryv3.DiscoveryRequest) (*xdstype.Type, error) {
	url := req.GetTypeUrl()
	if st.typeURL != "" {
		if url != "" && url != st.typeURL {
			return nil, status.Errorf(codes.InvalidArgument, "type_url %q on a stream for %q", url, st.typeURL)
		}
		return st.srv.opts.Registry.Lookup(st.typeURL), nil
	}
	if url == "" {
		return nil, status.Error(codes.InvalidArgument, "every request on an aggregated (ADS) stream must carry type_url")
	}
	t := st.srv.opts.Registry.Lookup(url)
	if t == nil || t.SotWMethod == "" {
		if !st.unknown[url] {
			st.unknown[url] = true
			st.log.Warn("ignoring request for a type Pylon does not serve in state of the world", "type_url", url)
		}
		return nil, nil
	}
	return t, nil
}

func (st *sotwStream) onNACK(t *xdstype.Type, req *discoveryv3.DiscoveryRequest) {
	msg := req.GetErrorDetail().GetMessage()
	st.srv.obs.Observe(Event{Kind: RequestNACK, StreamID: st.id, Node: st.node, ADS: st.typeURL == "", TypeURL: t.URL, Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(), Detail: msg, At: time.Now()})
	key := [2]string{t.URL, st.watches[t.URL].version}
	if st.nacks[key] {
		return
	}
	st.nacks[key] = true
	// The rejected version is not sent again (X12); the proxy keeps running
	// version_info until the config changes.
	st.log.Warn("proxy rejected config", "type", t.Abbrev, "rejected_version", st.watches[t.URL].version, "running_version", req.GetVersionInfo(), "error_detail", msg)
}

func (st *sotwStream) snapshot() *snapshot.Snapshot {
	if st.fleet == nil {
		return nil
	}
	return st.fleet.For(st.node)
}

// onFleet sends, in make-before-break order, every type whose view changed.
func (st *sotwStream) onFleet() error {
	st.fleet = st.srv.opts.Fleets.Current()
	snap := st.snapshot()
	if snap == nil || st.node == nil {
		return nil
	}
	for _, t := range st.srv.opts.Registry.Ranked() {
		w := st.watches[t.URL]
		if w == nil || !w.changedSince(snap) {
			continue
		}
		if err := st.send(w, snap); err != nil {
			return err
		}
	}
	return nil
}

func (st *sotwStream) send(w *watch, snap *snapshot.Snapshot) error {
	st.nonces++
	resp := w.response(snap, strconv.FormatUint(st.nonces, 10))
	resp.ControlPlane = st.srv.cp
	if err := st.grpc.SendMsg(resp); err != nil {
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
	st.srv.obs.Observe(Event{Kind: ResponseSent, StreamID: st.id, Node: st.node, ADS: st.typeURL == "", TypeURL: w.typ.URL, Version: resp.VersionInfo, Nonce: resp.Nonce, Resources: len(resp.Resources), At: time.Now()})
	st.log.Debug("sent", "type", w.typ.Abbrev, "version", resp.VersionInfo, "nonce", resp.Nonce, "resources", len(resp.Resources))
	return nil
}

func (st *sotwStream) markWarm(typeURL string) {
	if w := st.watches[typeURL]; w != nil && w.started {
		w.warm = true
	}
}
