package xdstest

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Proxy is a model of what an Envoy holds, driven over one ADS stream the way
// Envoy drives it: wildcard clusters and listeners, assignments for the EDS
// clusters it holds, route configurations for the listeners it holds. It
// applies each response in arrival order and checks after every message that
// no route or TCP proxy names a cluster the proxy lacks (absent, or an EDS
// cluster that never got its assignment: Envoy keeps such a cluster warming
// and out of use).
type Proxy struct {
	t     testing.TB
	reg   *xdstype.Registry
	sotw  *Stream
	delta *DeltaStream

	Clusters  map[string]*clusterv3.Cluster
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
	// warm holds the clusters that have had an assignment since they were
	// added: Envoy uses a new EDS cluster only then, and keeps using an
	// updated one while its new version warms.
	warm map[string]bool

	// Reject, if set, makes the proxy NACK any response holding a resource
	// for which it returns a non-empty reason.
	Reject func(proto.Message) string
	// Slow, if set, makes the proxy keep its ACKs of the type until
	// ReleaseACKs.
	Slow    map[string]bool
	delayed []func()

	eds, rds []string // current subscriptions
	// accepted is, per type, the version of the last response applied: a
	// state-of-the-world NACK carries it.
	accepted map[string]string
	probes   int
	// Violations lists every broken invariant, with the message that broke it.
	Violations []string
	// Messages counts the responses applied.
	Messages int
	// Trace, if set, is told every response and request, for debugging.
	Trace func(string)
}

// NewProxy opens an ADS stream (delta when delta is set) for node id and
// subscribes like Envoy at startup.
func NewProxy(t testing.TB, conn *grpc.ClientConn, id string, delta bool) *Proxy {
	p := &Proxy{
		t: t, reg: xdstype.New(),
		Clusters: map[string]*clusterv3.Cluster{}, Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
		Listeners: map[string]*listenerv3.Listener{}, Routes: map[string]*routev3.RouteConfiguration{},
		warm: map[string]bool{}, Slow: map[string]bool{}, accepted: map[string]string{},
	}
	if delta {
		p.delta = OpenDeltaADS(t, conn, Node(id))
		p.delta.Subscribe(xdstype.ClusterURL)
		p.delta.Subscribe(xdstype.ListenerURL)
	} else {
		p.sotw = OpenADS(t, conn, Node(id))
		p.sotw.Request(xdstype.ClusterURL)
		p.sotw.Request(xdstype.ListenerURL)
	}
	return p
}

// Reconnect ends the proxy's stream and opens a new one on conn for the
// same node, as Envoy does when its stream to a replica dies: it keeps
// what it holds and asks again for every type it subscribes to (clusters,
// their assignments, listeners, their routes, in Envoy's order), each with
// the version it last accepted and no nonce, since nothing was received
// on the new stream (X24). Later requests carry those versions too. ACKs
// kept back for slow types are lost with the old stream. State of the
// world only.
func (p *Proxy) Reconnect(conn *grpc.ClientConn) {
	p.t.Helper()
	if p.sotw == nil {
		p.t.Fatal("Reconnect: the model reconnects state-of-the-world streams only")
	}
	node := p.sotw.node
	p.sotw.Close()
	p.delayed = nil
	clear(p.Slow)
	p.probes = 0
	p.sotw = OpenADS(p.t, conn, node)
	for _, url := range []string{xdstype.ClusterURL, xdstype.EndpointURL, xdstype.ListenerURL, xdstype.RouteURL} {
		names := p.names(url)
		if (url == xdstype.EndpointURL || url == xdstype.RouteURL) && len(names) == 0 {
			continue
		}
		p.sotw.Version[url] = p.accepted[url]
		p.sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: url, ResourceNames: names, VersionInfo: p.accepted[url]})
	}
}

// response is one response of either variant, as the model applies it.
type response struct {
	typeURL   string
	resources []*anypb.Any
	removed   []string
	full      bool // state of the world: the set replaces what the proxy holds (LDS, CDS)
	sotw      *discoveryv3.DiscoveryResponse
	delta     *discoveryv3.DeltaDiscoveryResponse
}

func (p *Proxy) recv() response {
	p.t.Helper()
	if p.delta != nil {
		r := p.delta.Recv()
		out := response{typeURL: r.TypeUrl, removed: r.RemovedResources, delta: r}
		for _, res := range r.Resources {
			if res.Resource != nil {
				out.resources = append(out.resources, res.Resource)
			}
		}
		return out
	}
	r := p.sotw.Recv()
	t := p.reg.Lookup(r.TypeUrl)
	return response{typeURL: r.TypeUrl, resources: r.Resources, full: t != nil && t.FullState, sotw: r}
}

// Step applies the next response. It returns false for a probe response.
func (p *Proxy) Step() bool {
	p.t.Helper()
	r := p.recv()
	if r.typeURL == xdstype.RuntimeURL {
		p.ack(r)
		return false
	}
	p.Messages++
	if p.Trace != nil {
		p.Trace(fmt.Sprintf("recv %s #%d resources=%v removed=%v", p.reg.Lookup(r.typeURL).Abbrev, p.Messages, names(r.resources), r.removed))
	}
	msgs := make([]proto.Message, 0, len(r.resources))
	for _, a := range r.resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			p.t.Fatalf("undecodable %s: %v", a.TypeUrl, err)
		}
		msgs = append(msgs, m)
	}
	if p.Reject != nil {
		for _, m := range msgs {
			if why := p.Reject(m); why != "" {
				p.nack(r, why)
				return true
			}
		}
	}
	p.apply(r, msgs)
	if r.sotw != nil {
		p.accepted[r.typeURL] = r.sotw.VersionInfo
	}
	p.check(fmt.Sprintf("after %s response %d", p.reg.Lookup(r.typeURL).Abbrev, p.Messages))
	if p.Slow[r.typeURL] {
		p.delayed = append(p.delayed, func() { p.ack(r) })
	} else {
		p.ack(r)
	}
	p.resubscribe()
	return true
}

// StepIfReady applies a response only if one has already arrived.
func (p *Proxy) StepIfReady() {
	p.t.Helper()
	var ready bool
	if p.delta != nil {
		ready = len(p.delta.resps) > 0
	} else {
		ready = len(p.sotw.resps) > 0
	}
	if ready {
		p.Step()
	}
}

// ReleaseACKs sends the ACKs kept back for slow types.
func (p *Proxy) ReleaseACKs() {
	for _, f := range p.delayed {
		f()
	}
	p.delayed = nil
	clear(p.Slow)
}

func (p *Proxy) apply(r response, msgs []proto.Message) {
	switch r.typeURL {
	case xdstype.ClusterURL:
		merge(p.Clusters, r, msgs, (*clusterv3.Cluster).GetName)
		for n := range p.warm {
			if p.Clusters[n] == nil {
				delete(p.warm, n)
			}
		}
		for n, c := range p.Clusters {
			if c.GetType() != clusterv3.Cluster_EDS || p.Endpoints[edsName(c)] != nil {
				p.warm[n] = true
			}
		}
	case xdstype.EndpointURL:
		merge(p.Endpoints, r, msgs, (*endpointv3.ClusterLoadAssignment).GetClusterName)
		for n, c := range p.Clusters {
			if p.Endpoints[edsName(c)] != nil {
				p.warm[n] = true
			}
		}
	case xdstype.ListenerURL:
		merge(p.Listeners, r, msgs, (*listenerv3.Listener).GetName)
	case xdstype.RouteURL:
		merge(p.Routes, r, msgs, (*routev3.RouteConfiguration).GetName)
	}
}

// merge applies one response to what the proxy holds of its type: a
// state-of-the-world set replaces it, otherwise resources are added or
// replaced by name and removed names dropped.
func merge[T proto.Message](held map[string]T, r response, msgs []proto.Message, name func(T) string) {
	if r.full {
		clear(held)
	}
	for _, m := range msgs {
		v := m.(T)
		held[name(v)] = v
	}
	for _, n := range r.removed {
		delete(held, n)
	}
}

func edsName(c *clusterv3.Cluster) string {
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return n
	}
	return c.GetName()
}

// check records a violation if a route or listener names a cluster the proxy
// cannot use.
func (p *Proxy) check(when string) {
	usable := func(c string) bool { return p.Clusters[c] != nil && p.warm[c] }
	for _, t := range []struct {
		url  string
		msgs map[string]proto.Message
	}{
		{xdstype.RouteURL, toMsgs(p.Routes)},
		{xdstype.ListenerURL, toMsgs(p.Listeners)},
	} {
		typ := p.reg.Lookup(t.url)
		for name, m := range t.msgs {
			for _, ref := range typ.Refs(m) {
				if ref.TypeURL == xdstype.ClusterURL && !usable(ref.Name) {
					p.Violations = append(p.Violations, fmt.Sprintf("%s: %s %q names cluster %q, which the proxy %s", when, typ.Kind, name, ref.Name, p.lack(ref.Name)))
				}
			}
		}
	}
}

func (p *Proxy) lack(c string) string {
	if p.Clusters[c] == nil {
		return "does not have"
	}
	return "has without its assignment (warming)"
}

func toMsgs[M proto.Message](m map[string]M) map[string]proto.Message {
	out := make(map[string]proto.Message, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// resubscribe updates the EDS and RDS subscriptions to what the proxy now
// needs, as Envoy does after applying clusters and listeners.
func (p *Proxy) resubscribe() {
	var eds []string
	for _, c := range p.Clusters {
		if c.GetType() == clusterv3.Cluster_EDS {
			eds = append(eds, edsName(c))
		}
	}
	var rds []string
	for _, l := range p.Listeners {
		for _, ref := range p.reg.Lookup(xdstype.ListenerURL).Refs(l) {
			if ref.TypeURL == xdstype.RouteURL {
				rds = append(rds, ref.Name)
			}
		}
	}
	p.eds = p.update(xdstype.EndpointURL, p.eds, eds)
	p.rds = p.update(xdstype.RouteURL, p.rds, rds)
	// Envoy drops what it no longer subscribes to.
	for n := range p.Endpoints {
		if !slices.Contains(p.eds, n) {
			delete(p.Endpoints, n)
		}
	}
	for n := range p.Routes {
		if !slices.Contains(p.rds, n) {
			delete(p.Routes, n)
		}
	}
}

func (p *Proxy) update(typeURL string, old, next []string) []string {
	sort.Strings(next)
	next = slices.Compact(next)
	if slices.Equal(old, next) {
		return old
	}
	if p.delta != nil {
		var sub, unsub []string
		for _, n := range next {
			if !slices.Contains(old, n) {
				sub = append(sub, n)
			}
		}
		for _, n := range old {
			if !slices.Contains(next, n) {
				unsub = append(unsub, n)
			}
		}
		if p.Trace != nil {
			p.Trace(fmt.Sprintf("send %s sub=%v unsub=%v", p.reg.Lookup(typeURL).Abbrev, sub, unsub))
		}
		p.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub})
	} else {
		if len(next) == 0 && len(old) > 0 {
			p.sotw.Request(typeURL) // empty after explicit: nothing
		} else {
			p.sotw.Request(typeURL, next...)
		}
	}
	return next
}

func (p *Proxy) names(typeURL string) []string {
	switch typeURL {
	case xdstype.EndpointURL:
		return p.eds
	case xdstype.RouteURL:
		return p.rds
	case xdstype.RuntimeURL:
		return []string{ProbeName}
	}
	return nil
}

func (p *Proxy) ack(r response) {
	if p.delta != nil {
		p.delta.ACK(r.delta)
		return
	}
	p.sotw.ACK(r.sotw, p.names(r.typeURL)...)
}

func (p *Proxy) nack(r response, why string) {
	if p.delta != nil {
		p.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.delta.Nonce, ErrorDetail: &status.Status{Code: 3, Message: why}})
		return
	}
	// The version stays the last one accepted.
	p.sotw.Send(&discoveryv3.DiscoveryRequest{
		TypeUrl: r.typeURL, ResourceNames: p.names(r.typeURL), ResponseNonce: r.sotw.Nonce,
		VersionInfo: p.accepted[r.typeURL], ErrorDetail: &status.Status{Code: 3, Message: why},
	})
}

// Settle applies responses until the server has nothing more to send: it
// sends a probe request and applies responses up to the probe's answer,
// again until a round brings nothing but the probe. Then every EDS cluster
// must have its assignment.
func (p *Proxy) Settle() {
	p.t.Helper()
	for round := 0; ; round++ {
		if round > 100 {
			p.t.Fatal("the server never settled")
		}
		p.probe()
		applied := 0
		for p.Step() {
			applied++
		}
		if applied == 0 {
			break
		}
	}
	for n, c := range p.Clusters {
		if c.GetType() == clusterv3.Cluster_EDS && p.Endpoints[edsName(c)] == nil {
			p.Violations = append(p.Violations, fmt.Sprintf("settled: EDS cluster %q has no assignment", n))
		}
	}
}

func (p *Proxy) probe() {
	p.probes++
	if p.delta != nil {
		p.delta.Subscribe(xdstype.RuntimeURL, ProbeName)
		return
	}
	if p.probes > 1 {
		p.sotw.Request(xdstype.RuntimeURL)
	}
	p.sotw.Request(xdstype.RuntimeURL, ProbeName)
}

// RouteTargets returns, per route configuration, the clusters it names.
func (p *Proxy) RouteTargets() map[string][]string {
	out := map[string][]string{}
	typ := p.reg.Lookup(xdstype.RouteURL)
	for n, rc := range p.Routes {
		for _, ref := range typ.Refs(rc) {
			out[n] = append(out[n], ref.Name)
		}
		sort.Strings(out[n])
	}
	return out
}

func names(as []*anypb.Any) []string {
	var out []string
	for _, a := range as {
		if m, err := a.UnmarshalNew(); err == nil {
			out = append(out, xdstype.NameOf(m))
		}
	}
	return out
}

// Refs returns the names of the clusters a route configuration or listener
// names.
func Refs(m proto.Message) []string {
	reg := xdstype.New()
	t := reg.Lookup("type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()))
	if t == nil || t.Refs == nil {
		return nil
	}
	var out []string
	for _, r := range t.Refs(m) {
		if r.TypeURL == xdstype.ClusterURL {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}
