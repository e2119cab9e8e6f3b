package main

import (
	"context"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	gcpserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/status"
)

// gcpFeed turns go-control-plane's stream callbacks into the events a
// syncWatch reads: a stream opened or closed, a response sent, an ACK (a
// request with the nonce of a response and no error_detail). There is no
// ResponseSpared: go-control-plane v0.14 answers a new stream's first
// request for every type (its snapshot cache responds when the stream has
// not yet returned a subscribed resource, which on a new stream is all of
// them, whatever version_info says), so a type it never answered would
// show as never SYNCED, not be taken as held.
type gcpFeed struct {
	w     *syncWatch
	mu    sync.Mutex
	nodes map[int64]*corev3.Node // per stream, from its first request
}

func (g *gcpFeed) observe(id int64, e status.Event) {
	g.mu.Lock()
	e.Node = g.nodes[id]
	if e.Kind == status.StreamClosed {
		delete(g.nodes, id)
	}
	g.mu.Unlock()
	e.StreamID, e.Group, e.At = uint64(id), "fleet", time.Now()
	g.w.Observe(&e)
}

func (g *gcpFeed) callbacks() gcpserver.Callbacks {
	return gcpserver.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, _ string) error {
			g.observe(id, status.Event{Kind: status.StreamOpened})
			return nil
		},
		StreamClosedFunc: func(id int64, _ *corev3.Node) { g.observe(id, status.Event{Kind: status.StreamClosed}) },
		StreamRequestFunc: func(id int64, r *discoveryv3.DiscoveryRequest) error {
			if r.GetNode() != nil {
				g.mu.Lock()
				g.nodes[id] = r.GetNode()
				g.mu.Unlock()
			}
			if r.GetResponseNonce() != "" && r.GetErrorDetail() == nil {
				g.observe(id, status.Event{Kind: status.RequestACK, TypeURL: r.GetTypeUrl(), Version: r.GetVersionInfo()})
			}
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			g.observe(id, status.Event{Kind: status.ResponseSent, TypeURL: r.GetTypeUrl(), Version: r.GetVersionInfo(), Resources: len(r.GetResources()), Bytes: proto.Size(r)})
		},
	}
}

// gcpVersion returns the version the shared snapshot has of a type.
func gcpVersion(c cache.SnapshotCache) func(group, typeURL string) string {
	return func(_, typeURL string) string {
		s, err := c.GetSnapshot("fleet")
		if err != nil {
			return ""
		}
		return s.GetVersion(typeURL)
	}
}
