package relay

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
)

// Admit takes a downstream stream of node n into its key: the key's
// upstream stream starts with its first proxy. It refuses a node the
// template makes no key of (FAILED_PRECONDITION) and a new key past
// MaxKeys (RESOURCE_EXHAUSTED). release ends the stream's use of the key.
func (r *Relay) Admit(n nodegroup.Node) (release func(), err error) {
	if r.o.Groups != nil {
		if _, ok := r.o.Groups.Current(); !ok {
			return nil, grpcstatus.Errorf(codes.Unavailable, "the relay has not read its upstream's group rules yet (%s): retry", r.o.Groups.URL)
		}
	}
	k, err := r.keyOf(n)
	if err != nil {
		return nil, grpcstatus.Error(codes.FailedPrecondition, err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil || r.ctx.Err() != nil {
		return nil, grpcstatus.Error(codes.Unavailable, "the relay is not serving")
	}
	ks := r.keys[k.Name]
	if ks == nil {
		if len(r.keys) >= r.o.MaxKeys {
			return nil, grpcstatus.Errorf(codes.ResourceExhausted, "the relay serves at most %d keys (--max-keys) and holds as many; node %q would add key %q", r.o.MaxKeys, n.ID, k.Name)
		}
		ks = r.newKey(k, nil)
		r.goKey(ks)
		r.o.Logger.Info("relay key added: its upstream stream starts", "key", k.Name, "node", n.ID)
	}
	ks.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if ks.streams--; ks.streams == 0 {
				ks.idleSince = time.Now()
			}
		})
	}, nil
}

// StreamInterceptor admits each xDS stream by the node of its first
// request (Admit) before the xDS server sees that request, so that a
// refused stream ends with the refusal and an admitted one's key is
// already on its way. CSDS and other services pass through.
func (r *Relay) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if strings.HasPrefix(info.FullMethod, "/envoy.service.status.") {
			return handler(srv, ss)
		}
		w := &admitted{ServerStream: ss, r: r}
		defer func() {
			if w.release != nil {
				w.release()
			}
		}()
		return handler(srv, w)
	}
}

// admitted is a stream whose first request is admitted.
type admitted struct {
	grpc.ServerStream
	r       *Relay
	done    bool
	release func()
}

func (a *admitted) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil || a.done {
		return err
	}
	a.done = true
	req, ok := m.(interface{ GetNode() *corev3.Node })
	if !ok || req.GetNode() == nil {
		return nil // the xDS server refuses a first request without a node
	}
	rel, err := a.r.Admit(fleet.NodeOf(req.GetNode()))
	if err != nil {
		return err
	}
	a.release = rel
	return nil
}

// Observe reports a downstream NACK upstream, on the stream of the
// proxy's key (upstream.Client.ReportNACK: once per upstream version).
func (r *Relay) Observe(e *status.Event) {
	if e.Kind != status.RequestNACK || e.Member == nil {
		return
	}
	k, err := r.keyOf(*e.Member)
	if err != nil {
		return
	}
	r.mu.Lock()
	ks := r.keys[k.Name]
	r.mu.Unlock()
	if ks == nil {
		return
	}
	detail := fmt.Sprintf("downstream proxy %q (through relay %s): %s", e.NodeID(), r.o.ID, e.Detail)
	if ks.client.ReportNACK(e.TypeURL, detail) {
		r.nacks.Add(1)
		r.o.Logger.Info("relay: a downstream NACK reported upstream", "key", k.Name, "node", e.NodeID(), "type", e.TypeURL)
	}
}

// Wants says the relay wants none of the per-change events: a NACK is
// always reported (status.Selective).
func (r *Relay) Wants(status.EventKind) bool { return false }
