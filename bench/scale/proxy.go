package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Bounds of a proxy's life: its streams, and the backoff between them
// (Envoy's own ADS backoff starts at 500 ms; shorter here so that a run
// takes seconds, with jitter so that a refused crowd does not return in
// step).
const (
	maxStreams  = 1000
	backoffBase = 50 * time.Millisecond
	backoffMax  = 2 * time.Second
)

// roundRobin is the load balancer in front of a replica set: each new
// connection goes to the next address of its list, as a round-robin
// balancer or a DNS name of every replica spreads them.
type roundRobin struct {
	mu    sync.Mutex
	addrs []string
	next  int
}

func newRoundRobin(addrs ...string) *roundRobin { return &roundRobin{addrs: addrs} }

func (r *roundRobin) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.addrs[r.next%len(r.addrs)]
	r.next++
	return a
}

// set replaces the list (a replica added to the balancer).
func (r *roundRobin) set(addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs = addrs
}

// link is one client connection that several proxies' streams share (a
// node agent's or a test's multiplexing); a proxy on a link that was shed
// or refused moves the link to the balancer's next address, the others
// follow it.
type link struct {
	rr   *roundRobin
	mu   sync.Mutex
	gen  int
	conn *grpc.ClientConn
	addr string
}

// current is the link's connection, dialed to the next address when there
// is none.
func (l *link) current() (*grpc.ClientConn, string, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		addr := l.rr.pick()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, "", 0, err
		}
		l.conn, l.addr = conn, addr
	}
	return l.conn, l.addr, l.gen, nil
}

// move drops the connection of generation gen (once, however many of its
// proxies ask), so that the next stream dials the next address.
func (l *link) move(gen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen || l.conn == nil {
		return
	}
	l.conn.Close()
	l.conn, l.gen = nil, l.gen+1
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
}

// proxy is a lean Envoy on one ADS stream at a time, SotW or delta: it
// subscribes to every cluster (wildcard) and to the assignment of each
// cluster it holds, ACKs every response, keeps what it holds across
// streams, and presents it on a new stream as Envoy does (version_info per
// type, or initial_resource_versions), so that what a resume costs is
// counted exactly.
type proxy struct {
	id, cluster string
	delta       bool
	want        int // clusters its group has at least (Pylon may add its own)
	link        *link

	mu       sync.Mutex
	clusters map[string]string // name -> version (delta) or "" (SotW)
	eds      map[string]string
	versions map[string]string // SotW: the type's version_info last accepted
	nonces   map[string]string // SotW: the type's last nonce on this stream
	open     bool              // a stream is open (not refused or ended yet)
	addr     string            // where the open stream is
	ident    string            // control_plane.identifier of the last response
	readyAt  time.Time
	lost     int // times it held its whole config and then did not
	streams  int
	resumes  int // streams opened after it was ready
	resent   int // resources received on those streams
	bytes    int // response bytes received (protobuf size), all streams
	ended    map[string]int
}

func newProxy(id, cluster string, delta bool, want int, l *link) *proxy {
	return &proxy{id: id, cluster: cluster, delta: delta, want: want, link: l,
		clusters: map[string]string{}, eds: map[string]string{}, versions: map[string]string{}, ended: map[string]int{}}
}

// ready reports whether the proxy holds its whole config; p.mu is held.
func (p *proxy) readyLocked() bool {
	if len(p.clusters) < p.want {
		return false
	}
	for name := range p.clusters {
		if _, ok := p.eds[name]; !ok {
			return false
		}
	}
	return true
}

// run keeps a stream open until ctx ends, moving to the balancer's next
// address whenever one ends (refused, shed, or the replica gone).
func (p *proxy) run(ctx context.Context) {
	fails := 0
	for range maxStreams {
		conn, addr, gen, err := p.link.current()
		answered := false
		if err == nil {
			answered, err = p.stream(ctx, conn, addr)
		}
		p.mu.Lock()
		p.open = false
		p.ended[endReason(err)]++
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		p.link.move(gen)
		if answered {
			fails = 0
		} else {
			fails++
		}
		d := min(backoffBase<<min(fails, 6), backoffMax)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d/2 + rand.N(d/2+1)):
		}
	}
}

// endReason names why a stream ended, for the run's summary.
func endReason(err error) string {
	st := grpcstatus.Convert(err)
	switch {
	case errors.Is(err, io.EOF):
		return "closed by the server (EOF)"
	case st.Code() == codes.ResourceExhausted:
		return "refused (RESOURCE_EXHAUSTED)"
	case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "over its share"):
		return "shed (UNAVAILABLE)"
	case st.Code() == codes.FailedPrecondition:
		return "not its shard (FAILED_PRECONDITION)"
	}
	return st.Code().String()
}

func (p *proxy) node() *corev3.Node {
	return &corev3.Node{Id: p.id, Cluster: p.cluster, UserAgentName: "envoy", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.36.0"}}
}

// stream runs one stream until it ends; answered is whether it lasted
// long enough to count as established (the backoff starts again).
func (p *proxy) stream(ctx context.Context, conn *grpc.ClientConn, addr string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	p.mu.Lock()
	p.streams++
	resumed := !p.readyAt.IsZero()
	if resumed {
		p.resumes++
	}
	p.mu.Unlock()
	opened := time.Now()
	var err error
	if p.delta {
		err = p.deltaStream(ctx, ads, addr, resumed)
	} else {
		err = p.sotwStream(ctx, ads, addr, resumed)
	}
	return time.Since(opened) > time.Second, err
}

// opened marks the stream open on addr.
func (p *proxy) opened(addr string) {
	p.mu.Lock()
	p.open, p.addr = true, addr
	p.mu.Unlock()
}

// settle records what a response left the proxy holding; p.mu is held.
func (p *proxy) settle(wasReady bool, ident string, resources, size int, resumed bool) {
	p.bytes += size
	if ident != "" {
		p.ident = ident
	}
	if resumed {
		p.resent += resources
	}
	now := p.readyLocked()
	if wasReady && !now {
		p.lost++
	}
	if now && p.readyAt.IsZero() {
		p.readyAt = time.Now()
	}
}

func (p *proxy) deltaStream(ctx context.Context, ads discoveryv3.AggregatedDiscoveryServiceClient, addr string, resumed bool) error {
	cs, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	first := []*discoveryv3.DeltaDiscoveryRequest{{Node: p.node(), TypeUrl: xdstype.ClusterURL, InitialResourceVersions: clone(p.clusters)}}
	if len(p.clusters) > 0 {
		first = append(first, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL,
			ResourceNamesSubscribe: keys(p.clusters), InitialResourceVersions: clone(p.eds)})
	}
	p.mu.Unlock()
	for _, req := range first {
		if err := cs.Send(req); err != nil {
			return err
		}
	}
	p.opened(addr)
	for {
		resp, err := cs.Recv()
		if err != nil {
			return err
		}
		p.mu.Lock()
		wasReady := p.readyLocked()
		held := p.clusters
		if resp.TypeUrl == xdstype.EndpointURL {
			held = p.eds
		}
		before := keys(p.clusters)
		for _, r := range resp.Resources {
			held[r.Name] = r.Version
		}
		for _, name := range resp.RemovedResources {
			delete(held, name)
		}
		var sub, unsub []string
		if resp.TypeUrl == xdstype.ClusterURL {
			sub, unsub = diff(before, keys(p.clusters))
			for _, name := range unsub {
				delete(p.eds, name)
			}
		}
		p.settle(wasReady, resp.GetControlPlane().GetIdentifier(), len(resp.Resources), proto.Size(resp), resumed)
		p.mu.Unlock()
		if err := cs.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}); err != nil {
			return err
		}
		if len(sub)+len(unsub) > 0 {
			if err := cs.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub}); err != nil {
				return err
			}
		}
	}
}

func (p *proxy) sotwStream(ctx context.Context, ads discoveryv3.AggregatedDiscoveryServiceClient, addr string, resumed bool) error {
	cs, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.nonces = map[string]string{}
	first := []*discoveryv3.DiscoveryRequest{{Node: p.node(), TypeUrl: xdstype.ClusterURL, VersionInfo: p.versions[xdstype.ClusterURL]}}
	if len(p.clusters) > 0 {
		first = append(first, &discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: keys(p.clusters), VersionInfo: p.versions[xdstype.EndpointURL]})
	}
	p.mu.Unlock()
	for _, req := range first {
		if err := cs.Send(req); err != nil {
			return err
		}
	}
	p.opened(addr)
	for {
		resp, err := cs.Recv()
		if err != nil {
			return err
		}
		names := resourceNames(resp)
		p.mu.Lock()
		wasReady := p.readyLocked()
		before := keys(p.clusters)
		p.versions[resp.TypeUrl], p.nonces[resp.TypeUrl] = resp.VersionInfo, resp.Nonce
		changed := false
		switch resp.TypeUrl {
		case xdstype.ClusterURL:
			p.clusters = set(names)
			changed = !slices.Equal(before, keys(p.clusters))
			for name := range p.eds {
				if _, ok := p.clusters[name]; !ok {
					delete(p.eds, name)
				}
			}
		case xdstype.EndpointURL:
			// A SotW response of a type other than listeners and
			// clusters carries what changed, not every name
			// subscribed to: what it leaves out is kept, as Envoy
			// keeps it.
			for _, name := range names {
				p.eds[name] = ""
			}
		}
		p.settle(wasReady, resp.GetControlPlane().GetIdentifier(), len(resp.Resources), proto.Size(resp), resumed)
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
		if resp.TypeUrl == xdstype.EndpointURL {
			ack.ResourceNames = keys(p.clusters)
		}
		var eds *discoveryv3.DiscoveryRequest
		if changed {
			eds = &discoveryv3.DiscoveryRequest{TypeUrl: xdstype.EndpointURL, ResourceNames: keys(p.clusters),
				VersionInfo: p.versions[xdstype.EndpointURL], ResponseNonce: p.nonces[xdstype.EndpointURL]}
		}
		p.mu.Unlock()
		if err := cs.Send(ack); err != nil {
			return err
		}
		if eds != nil {
			if err := cs.Send(eds); err != nil {
				return err
			}
		}
	}
}

// resourceNames are the names of a SotW response's clusters or
// assignments.
func resourceNames(resp *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range resp.Resources {
		switch resp.TypeUrl {
		case xdstype.ClusterURL:
			var c clusterv3.Cluster
			if proto.Unmarshal(a.Value, &c) == nil {
				out = append(out, c.Name)
			}
		case xdstype.EndpointURL:
			var c endpointv3.ClusterLoadAssignment
			if proto.Unmarshal(a.Value, &c) == nil {
				out = append(out, c.ClusterName)
			}
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func set(names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = ""
	}
	return out
}

// diff is what b has that a has not, and what a has that b has not; both
// sorted.
func diff(a, b []string) (added, gone []string) {
	for _, n := range b {
		if _, ok := slices.BinarySearch(a, n); !ok {
			added = append(added, n)
		}
	}
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			gone = append(gone, n)
		}
	}
	return added, gone
}
