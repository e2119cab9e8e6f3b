package replicas_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// adsOrder is the order in which Envoy asks for its types on a new ADS
// stream: clusters, their assignments, listeners, their routes.
func adsOrder() []string {
	return []string{xdstype.ClusterURL, xdstype.EndpointURL, xdstype.ListenerURL, xdstype.RouteURL}
}

// wildcard reports whether Envoy subscribes to every resource of typ
// (listeners and clusters) rather than by name.
func wildcard(typ string) bool { return typ == xdstype.ClusterURL || typ == xdstype.ListenerURL }

// Bounds of an envoy's reconnection loop: it retries a failed stream
// after retryDelay, at most maxStreams times in its life.
const (
	retryDelay = 50 * time.Millisecond
	maxStreams = 2000
)

// envoy is a scripted client that behaves like Envoy on one ADS stream at
// a time, SotW or delta: wildcard clusters and listeners, assignments and
// route configurations by name for the clusters and listeners it holds. It
// keeps what it holds across streams and, when its stream ends, opens a
// new one at once presenting it as Envoy does: the version_info it last
// accepted per type (SotW), or initial_resource_versions per type (delta).
// It counts what it receives on each stream, so a test can tell exactly
// what a reconnection cost.
type envoy struct {
	t      *testing.T
	node   string
	delta  bool
	conn   *grpc.ClientConn
	reg    *xdstype.Registry
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	wake chan struct{} // closed and replaced on every change
	// version is, per type, the version_info last accepted (SotW).
	version map[string]string
	// held is, per type, what the proxy holds: name -> the resource's
	// version (delta), or the type's version_info it came with (SotW).
	held map[string]map[string]string
	// edsOf and rdsOf are what the held clusters and listeners name.
	edsOf map[string]string
	rdsOf map[string][]string
	// eds and rds are the names subscribed to, sorted.
	eds, rds []string
	streams  []*streamStats
}

// streamStats is what one stream brought.
type streamStats struct {
	responses, resources, bytes int
	// identifier is the control_plane.identifier of the last response.
	identifier string
	err        error     // why it ended; nil while open
	ended      time.Time // when it ended; zero while open
}

// dialEnvoy connects to addr (a replica or the forwarder) with a short
// reconnection backoff: the tests wait for reconnections, and grpc-go's
// default starts at a second.
func dialEnvoy(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = 50*time.Millisecond, 500*time.Millisecond
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startEnvoy runs an envoy named node on addr until the test ends.
func startEnvoy(t *testing.T, addr, node string, delta bool) *envoy {
	t.Helper()
	conn := dialEnvoy(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	e := &envoy{
		t: t, node: node, delta: delta, conn: conn, reg: xdstype.New(), cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}), version: map[string]string{}, held: map[string]map[string]string{},
		edsOf: map[string]string{}, rdsOf: map[string][]string{},
	}
	for _, typ := range adsOrder() {
		e.held[typ] = map[string]string{}
	}
	go e.run(ctx)
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
	return e
}

func (e *envoy) run(ctx context.Context) {
	defer close(e.done)
	for range maxStreams {
		var err error
		if e.delta {
			err = e.deltaStream(ctx)
		} else {
			err = e.sotwStream(ctx)
		}
		e.mu.Lock()
		if n := len(e.streams); n > 0 && e.streams[n-1].ended.IsZero() {
			e.streams[n-1].err, e.streams[n-1].ended = err, time.Now()
		}
		e.changed()
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryDelay):
		}
	}
}

// changed wakes the waiters; e.mu is held.
func (e *envoy) changed() {
	close(e.wake)
	e.wake = make(chan struct{})
}

// newStream records a stream that opened; e.mu is held.
func (e *envoy) newStream() *streamStats {
	s := &streamStats{}
	e.streams = append(e.streams, s)
	e.changed()
	return s
}

func (e *envoy) nodeProto() *corev3.Node {
	return &corev3.Node{Id: e.node, Cluster: "replicas-test", UserAgentName: "envoy-like"}
}

// names is what the proxy subscribes to of typ by name (nil for the
// wildcard types); e.mu is held.
func (e *envoy) names(typ string) []string {
	switch typ {
	case xdstype.EndpointURL:
		return e.eds
	case xdstype.RouteURL:
		return e.rds
	}
	return nil
}

func openStream(ctx context.Context, conn *grpc.ClientConn, method string) (grpc.ClientStream, error) {
	return conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
}

// sotwStream runs one SotW ADS stream until it ends.
func (e *envoy) sotwStream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := openStream(ctx, e.conn, xdstest.ADSMethod)
	if err != nil {
		return err
	}
	nonce := map[string]string{}
	send := func(typ string) error {
		e.mu.Lock()
		req := &discoveryv3.DiscoveryRequest{Node: e.nodeProto(), TypeUrl: typ, ResourceNames: e.names(typ), VersionInfo: e.version[typ], ResponseNonce: nonce[typ]}
		e.mu.Unlock()
		return cs.SendMsg(req)
	}
	e.mu.Lock()
	st := e.newStream()
	var first []string
	for _, typ := range adsOrder() {
		if wildcard(typ) || len(e.names(typ)) > 0 {
			first = append(first, typ)
		}
	}
	e.mu.Unlock()
	for _, typ := range first {
		if err := send(typ); err != nil {
			return err
		}
	}
	for {
		resp := new(discoveryv3.DiscoveryResponse)
		if err := cs.RecvMsg(resp); err != nil {
			return err
		}
		nonce[resp.TypeUrl] = resp.Nonce
		resub, err := e.applySotW(st, resp)
		if err != nil {
			return err
		}
		// The ACK: the version just accepted, this response's nonce.
		if err := send(resp.TypeUrl); err != nil {
			return err
		}
		for _, typ := range resub {
			if err := send(typ); err != nil {
				return err
			}
		}
	}
}

// applySotW applies a SotW response and returns the types whose
// subscriptions changed.
func (e *envoy) applySotW(st *streamStats, resp *discoveryv3.DiscoveryResponse) ([]string, error) {
	msgs, err := e.decode(resp.Resources)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.changed()
	e.count(st, resp.Resources, resp.GetControlPlane().GetIdentifier())
	held := e.held[resp.TypeUrl]
	if held == nil {
		return nil, nil
	}
	if wildcard(resp.TypeUrl) {
		// The whole set: what is absent is deleted.
		clear(held)
	}
	for _, m := range msgs {
		held[xdstype.NameOf(m)] = resp.VersionInfo
	}
	e.version[resp.TypeUrl] = resp.VersionInfo
	return e.follow(resp.TypeUrl, msgs, nil), nil
}

// deltaStream runs one delta ADS stream until it ends.
func (e *envoy) deltaStream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := openStream(ctx, e.conn, xdstest.DeltaADSMethod)
	if err != nil {
		return err
	}
	e.mu.Lock()
	st := e.newStream()
	var first []*discoveryv3.DeltaDiscoveryRequest
	for _, typ := range adsOrder() {
		names := e.names(typ)
		if !wildcard(typ) && len(names) == 0 {
			continue
		}
		// A wildcard type subscribes with no name (the legacy wildcard,
		// as Envoy does); every type says what the proxy holds of it.
		first = append(first, &discoveryv3.DeltaDiscoveryRequest{
			Node: e.nodeProto(), TypeUrl: typ, ResourceNamesSubscribe: slices.Clone(names), InitialResourceVersions: maps.Clone(e.held[typ]),
		})
	}
	e.mu.Unlock()
	for _, req := range first {
		if err := cs.SendMsg(req); err != nil {
			return err
		}
	}
	for {
		resp := new(discoveryv3.DeltaDiscoveryResponse)
		if err := cs.RecvMsg(resp); err != nil {
			return err
		}
		subs, err := e.applyDelta(st, resp)
		if err != nil {
			return err
		}
		if err := cs.SendMsg(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}); err != nil {
			return err
		}
		for _, req := range subs {
			if err := cs.SendMsg(req); err != nil {
				return err
			}
		}
	}
}

// applyDelta applies a delta response and returns the subscription changes
// it calls for.
func (e *envoy) applyDelta(st *streamStats, resp *discoveryv3.DeltaDiscoveryResponse) ([]*discoveryv3.DeltaDiscoveryRequest, error) {
	var anys []*anypb.Any
	for _, r := range resp.Resources {
		if r.Resource != nil {
			anys = append(anys, r.Resource)
		}
	}
	msgs, err := e.decode(anys)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.changed()
	e.count(st, anys, resp.GetControlPlane().GetIdentifier())
	held := e.held[resp.TypeUrl]
	if held == nil {
		return nil, nil
	}
	for _, r := range resp.Resources {
		if r.Resource != nil {
			held[r.Name] = r.Version
		}
	}
	for _, n := range resp.RemovedResources {
		delete(held, n)
	}
	old := map[string][]string{xdstype.EndpointURL: e.eds, xdstype.RouteURL: e.rds}
	var out []*discoveryv3.DeltaDiscoveryRequest
	for _, typ := range e.follow(resp.TypeUrl, msgs, resp.RemovedResources) {
		sub, unsub := diff(old[typ], e.names(typ))
		out = append(out, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub})
	}
	return out, nil
}

func (e *envoy) decode(anys []*anypb.Any) ([]proto.Message, error) {
	msgs := make([]proto.Message, 0, len(anys))
	for _, a := range anys {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("%s sent an undecodable %s: %w", e.node, a.TypeUrl, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// count records a response on st; e.mu is held.
func (e *envoy) count(st *streamStats, anys []*anypb.Any, identifier string) {
	st.responses++
	st.resources += len(anys)
	for _, a := range anys {
		st.bytes += len(a.GetValue())
	}
	st.identifier = identifier
}

// follow updates what the held clusters and listeners name after a
// response of typ (msgs applied, removed deleted) and returns the named
// types whose subscriptions changed. A SotW cluster or listener response
// is the whole set. e.mu is held.
func (e *envoy) follow(typ string, msgs []proto.Message, removed []string) []string {
	switch typ {
	case xdstype.ClusterURL:
		if !e.delta {
			clear(e.edsOf)
		}
		for _, m := range msgs {
			c := m.(*clusterv3.Cluster)
			e.edsOf[c.GetName()] = ""
			if c.GetType() == clusterv3.Cluster_EDS {
				e.edsOf[c.GetName()] = orElse(c.GetEdsClusterConfig().GetServiceName(), c.GetName())
			}
		}
		for _, n := range removed {
			delete(e.edsOf, n)
		}
		return e.resubscribe(xdstype.EndpointURL, &e.eds, e.edsOf)
	case xdstype.ListenerURL:
		if !e.delta {
			clear(e.rdsOf)
		}
		lt := e.reg.Lookup(xdstype.ListenerURL)
		for _, m := range msgs {
			var rds []string
			for _, ref := range lt.Refs(m) {
				if ref.TypeURL == xdstype.RouteURL {
					rds = append(rds, ref.Name)
				}
			}
			e.rdsOf[xdstype.NameOf(m)] = rds
		}
		for _, n := range removed {
			delete(e.rdsOf, n)
		}
		routes := map[string]string{}
		for l, names := range e.rdsOf {
			for _, n := range names {
				routes[l+"/"+n] = n
			}
		}
		return e.resubscribe(xdstype.RouteURL, &e.rds, routes)
	}
	return nil
}

// resubscribe sets *subs to the names refs hold and, when that changed,
// drops what is no longer subscribed (as Envoy does) and returns typ.
func (e *envoy) resubscribe(typ string, subs *[]string, refs map[string]string) []string {
	var next []string
	for _, n := range refs {
		if n != "" {
			next = append(next, n)
		}
	}
	sort.Strings(next)
	next = slices.Compact(next)
	if slices.Equal(next, *subs) {
		return nil
	}
	*subs = next
	for n := range e.held[typ] {
		if !slices.Contains(next, n) {
			delete(e.held[typ], n)
		}
	}
	return []string{typ}
}

// diff is what next adds to old and what it drops.
func diff(old, next []string) (add, drop []string) {
	for _, n := range next {
		if !slices.Contains(old, n) {
			add = append(add, n)
		}
	}
	for _, n := range old {
		if !slices.Contains(next, n) {
			drop = append(drop, n)
		}
	}
	return add, drop
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// waitFor waits until cond, called with e.mu held, holds, within bound.
func (e *envoy) waitFor(what string, cond func(*envoy) bool) {
	e.t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		ok, wake := cond(e), e.wake
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			e.t.Fatalf("%s: not within %v: %s\n%s", e.node, bound, what, e)
		}
	}
}

// ready waits until the proxy holds every type, the given clusters among
// them, each cluster with its assignment.
func (e *envoy) ready(clusters ...string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("holding every type and clusters %v with their assignments", clusters), func(e *envoy) bool {
		for _, typ := range adsOrder() {
			if len(e.held[typ]) == 0 {
				return false
			}
		}
		for _, c := range clusters {
			if _, ok := e.held[xdstype.ClusterURL][c]; !ok {
				return false
			}
		}
		for _, n := range e.eds {
			if _, ok := e.held[xdstype.EndpointURL][n]; !ok {
				return false
			}
		}
		for _, n := range e.rds {
			if _, ok := e.held[xdstype.RouteURL][n]; !ok {
				return false
			}
		}
		return true
	})
}

// received is the number of resources received on every stream so far,
// and their encoded bytes.
func (e *envoy) received() (resources, bytes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.streams {
		resources += s.resources
		bytes += s.bytes
	}
	return resources, bytes
}

// streamCount is the number of streams opened so far.
func (e *envoy) streamCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.streams)
}

// endedAfter is when the first stream that ended after t ended (zero if
// none has).
func (e *envoy) endedAfter(t time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.streams {
		if s.ended.After(t) {
			return s.ended
		}
	}
	return time.Time{}
}

// identifier is the control_plane.identifier of the last response.
func (e *envoy) identifier() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.streams) - 1; i >= 0; i-- {
		if id := e.streams[i].identifier; id != "" {
			return id
		}
	}
	return ""
}

// holding is a copy of what the proxy holds: per type, name -> version.
func (e *envoy) holding() map[string]map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]map[string]string{}
	for typ, h := range e.held {
		out[typ] = maps.Clone(h)
	}
	return out
}

// versions is a copy of the SotW version_info accepted per type.
func (e *envoy) versions() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.version)
}

// String describes the proxy's state for a failure message (it takes
// e.mu).
func (e *envoy) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b []byte
	for _, typ := range adsOrder() {
		b = fmt.Appendf(b, "  %s: version %q, %d held %v\n", e.reg.Lookup(typ).Abbrev, e.version[typ], len(e.held[typ]), slices.Sorted(maps.Keys(e.held[typ])))
	}
	for i, s := range e.streams {
		b = fmt.Appendf(b, "  stream %d: %d responses, %d resources, from %q, ended: %v\n", i, s.responses, s.resources, s.identifier, s.err)
	}
	return string(b)
}
