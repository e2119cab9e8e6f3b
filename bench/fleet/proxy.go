package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/cowmap"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// fleet is the simulated proxies and what they have seen.
type fleet struct {
	n, clusters int
	delta       bool
	// prefix is before each service name asked for (prefixNames).
	prefix string
	// present: a proxy opening a new stream tells the server what it
	// holds, as Envoy does (SotW: version_info per type; delta:
	// initial_resource_versions). Without it, it asks as a new proxy would.
	present bool
	perConn int
	names   []string
	// targets holds, per server, the connections the proxies share
	// (perConn streams each). A proxy whose stream ends UNAVAILABLE tries
	// the next server, as Envoy's ADS cluster of several hosts would.
	targets [][]*grpc.ClientConn
	proxies []*proxy

	ready     atomic.Int64 // proxies with a full config
	epoch     atomic.Int64 // the change being measured
	edsSeen   atomic.Int64 // proxies that got the change's EDS response
	rdsSeen   atomic.Int64
	bytes     atomic.Int64 // response bytes received
	resources atomic.Int64 // resources received
	mu        sync.Mutex
	lat       []time.Duration
	started   time.Time
	// rlat is each proxy's route change latency since started, as lat
	// is the EDS change's.
	rlat []time.Duration
	// churn, in the churn scenario, follows each change to each proxy.
	churn    *churnTracker
	waitMax  atomic.Int64 // longest open-to-ready, ns
	retries  atomic.Int64 // streams that ended and were retried
	failed   atomic.Int64 // proxies that gave up
	firstErr atomic.Pointer[error]
	// strings are the names and versions the delta proxies hold, one copy
	// each for the whole fleet (intern).
	strings cowmap.Map[string, string]
}

// maxInterned bounds the strings intern keeps: the names and versions of
// a scenario's resources are a few hundred.
const maxInterned = 4096

// intern returns b as a string, the fleet's one copy of it: 5,000 delta
// proxies each holding 200 names and versions would otherwise allocate
// two million strings on the cores the server runs on. Reads take no
// lock (proxies on every core look strings up at once); a new string
// copies the map.
func (f *fleet) intern(b []byte) string {
	m := f.strings.Load()
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(m) >= maxInterned {
		return s // full: no lock for what would not be kept
	}
	return f.strings.LoadOrStore(s, s, maxInterned)
}

// prefixNames puts prefix before every service name the proxies ask
// for: a Kubernetes source's are NAMESPACE/NAME.
func (f *fleet) prefixNames(prefix string) {
	f.prefix = prefix
	for i := range f.names {
		f.names[i] = prefix + clusterName(i)
	}
}

func newFleet(n, clusters int, delta bool, perConn int) *fleet {
	f := &fleet{n: n, clusters: clusters, delta: delta, present: true, perConn: perConn}
	for i := range clusters {
		f.names = append(f.names, clusterName(i))
	}
	return f
}

// dial makes the connections to each server; gRPC connects lazily, at a
// connection's first stream.
func (f *fleet) dial(addrs ...string) error {
	for _, addr := range addrs {
		var conns []*grpc.ClientConn
		for len(conns)*f.perConn < f.n {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.ForceCodecV2(newProxyCodec())))
			if err != nil {
				return err
			}
			conns = append(conns, conn)
		}
		f.targets = append(f.targets, conns)
	}
	return nil
}

// open starts every proxy; a proxy made from prev keeps what prev held
// (delta versions only: the reconnect scenario of a restarted process).
func (f *fleet) open(prev []*proxy) {
	f.proxies = make([]*proxy, f.n)
	for i := range f.n {
		ctx, cancel := context.WithCancel(context.Background())
		p := &proxy{f: f, id: i, ctx: ctx, cancel: cancel, done: make(chan struct{}), opened: time.Now()}
		if prev != nil {
			p.versions = prev[i].versions
		}
		f.proxies[i] = p
		go func() {
			if err := p.run(); err != nil {
				f.failed.Add(1)
				f.firstErr.CompareAndSwap(nil, &err)
			}
		}()
	}
}

// stop ends every proxy and waits for them, at most a minute.
func (f *fleet) stop() error {
	for _, p := range f.proxies {
		p.cancel()
	}
	limit := time.After(time.Minute)
	for _, p := range f.proxies {
		select {
		case <-p.done:
		case <-limit:
			return errors.New("proxies did not stop within a minute")
		}
	}
	return nil
}

func (f *fleet) close() {
	for _, conns := range f.targets {
		for _, c := range conns {
			c.Close()
		}
	}
}

// failures says how many proxies gave up, and the first one's error.
func (f *fleet) failures() string {
	if e := f.firstErr.Load(); e != nil {
		return fmt.Sprintf("%d proxies gave up, the first with: %v", f.failed.Load(), *e)
	}
	return ""
}

type proxy struct {
	f      *fleet
	id     int
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	cs     grpc.ClientStream
	// What the proxy holds, kept across its streams as Envoy keeps it:
	// subs, the types it subscribes to in the order it first did (a new
	// stream asks for them again in that order, as Envoy's ADS mux does);
	// acked, per type, the version_info of the last SotW response it
	// ACKed; versions (delta), per type and name, the version it holds.
	subs     []string
	acked    map[string]string
	versions map[string]map[string]string
	// server indexes fleet.targets: the server the proxy talks to.
	server int
	// Per stream.
	have     int  // bit per type
	nodeSent bool // the stream's first request carried the node
	readied  bool
	edsEpoch int64
	rdsEpoch int64
	opened   time.Time
	// churn: what the proxy holds of each service it subscribes to;
	// edsNames: those services (the churn scenario's proxies subscribe
	// to a few, as a sidecar does).
	churn    map[int]held
	edsNames []string
}

const (
	hasCDS = 1 << iota
	hasEDS
	hasLDS
	hasRDS
)

// envoyBackoff is how Envoy retries an xDS stream: fully jittered
// exponential backoff, each wait uniform in [0, interval), the interval
// starting at 500 ms and doubling up to 30 s (Envoy's defaults for a gRPC
// config source, JitteredExponentialBackOffStrategy(500, 30000)), and
// starting over once a stream receives a response.
type envoyBackoff struct{ interval time.Duration }

func (b *envoyBackoff) next() time.Duration {
	if b.interval == 0 {
		b.interval = 500 * time.Millisecond
	}
	d := time.Duration(rand.Int64N(int64(b.interval)))
	b.interval = min(2*b.interval, 30*time.Second)
	return d
}

// run keeps the proxy connected until cancelled. Like Envoy, a stream the
// server ends (RESOURCE_EXHAUSTED from an admission bound, UNAVAILABLE: a
// killed server) is retried after envoyBackoff; after UNAVAILABLE the retry
// goes to the next server. At most 20 failures in a row.
func (p *proxy) run() error {
	defer close(p.done)
	var backoff envoyBackoff
	for failures := 0; ; failures++ {
		answered, err := p.stream()
		if p.ctx.Err() != nil {
			return nil
		}
		if answered {
			backoff, failures = envoyBackoff{}, 0
		}
		c := status.Code(err)
		if (c != codes.ResourceExhausted && c != codes.Unavailable) || failures == 20 {
			return err
		}
		if c == codes.Unavailable {
			p.server = (p.server + 1) % len(p.f.targets)
		}
		p.f.retries.Add(1)
		select {
		case <-time.After(backoff.next()):
		case <-p.ctx.Done():
			return nil
		}
	}
}

// stream runs one xDS stream until it fails, and says whether it received
// anything.
func (p *proxy) stream() (answered bool, err error) {
	method := "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	if p.f.delta {
		method = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	}
	conn := p.f.targets[p.server][p.id/p.f.perConn]
	cs, err := conn.NewStream(p.ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return false, err
	}
	p.cs, p.have, p.nodeSent, p.readied = cs, 0, false, false
	if p.versions == nil {
		p.versions = map[string]map[string]string{}
	}
	if p.acked == nil {
		p.acked = map[string]string{}
	}
	if len(p.subs) == 0 {
		p.subscribe(xdstype.ClusterURL)
		p.subscribe(xdstype.ListenerURL)
	} else {
		for _, url := range p.subs {
			p.ask(url)
		}
	}
	for {
		url, err := p.receive()
		if err != nil {
			return answered, err
		}
		answered = true
		p.onResponse(url)
	}
}

func (p *proxy) subscribe(url string) {
	p.subs = append(p.subs, url)
	p.ask(url)
}

// ask sends the stream's first request for a type: its names and, when
// the fleet presents what it holds, the version it last ACKed (SotW, no
// nonce: the nonce belonged to the old stream) or the versions it holds
// (delta).
func (p *proxy) ask(url string) {
	var node *corev3.Node
	if !p.nodeSent {
		node, p.nodeSent = &corev3.Node{Id: fmt.Sprintf("envoy-%d", p.id), Cluster: "bench"}, true
	}
	if p.f.delta {
		r := &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: url, ResourceNamesSubscribe: p.names(url)}
		if p.f.present {
			r.InitialResourceVersions = p.versions[url]
		}
		if e, err := encodeDelta(r); err == nil {
			_ = p.cs.SendMsg(e)
		}
		return
	}
	r := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: url, ResourceNames: p.names(url)}
	if p.f.present {
		r.VersionInfo = p.acked[url]
	}
	_ = p.cs.SendMsg(r)
}

// receive reads one response, takes what it carries, ACKs it and returns
// its type. The response is read off the wire (rawResponse); in the churn
// scenario each assignment's body goes to the tracker as it is read.
func (p *proxy) receive() (string, error) {
	f := p.f
	var onEDS func([]byte)
	if f.churn != nil {
		onEDS = func(b []byte) { f.churn.saw(p, b) }
	}
	if f.delta {
		r := rawDelta{rawResponse{intern: f.intern, onEDS: onEDS}}
		if err := p.cs.RecvMsg(&r); err != nil {
			return "", err
		}
		f.bytes.Add(int64(r.size))
		f.resources.Add(int64(r.resources))
		held := p.versions[r.typeURL]
		if held == nil {
			held = make(map[string]string, len(r.names))
			p.versions[r.typeURL] = held
		}
		for i, name := range r.names {
			held[name] = r.versions[i]
		}
		for _, n := range r.removed {
			delete(held, n)
		}
		if f.churn != nil && r.typeURL == xdstype.EndpointURL {
			f.churn.edsResponses.Add(1)
		}
		_ = p.cs.SendMsg(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce})
		return r.typeURL, nil
	}
	r := rawSotW{rawResponse{onEDS: onEDS}}
	if err := p.cs.RecvMsg(&r); err != nil {
		return "", err
	}
	f.bytes.Add(int64(r.size))
	f.resources.Add(int64(r.resources))
	if f.churn != nil && r.typeURL == xdstype.EndpointURL {
		f.churn.edsResponses.Add(1)
	}
	p.acked[r.typeURL] = r.version
	_ = p.cs.SendMsg(&discoveryv3.DiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce, VersionInfo: r.version, ResourceNames: p.names(r.typeURL)})
	return r.typeURL, nil
}

func (p *proxy) names(url string) []string {
	switch url {
	case xdstype.EndpointURL:
		if p.f.churn == nil {
			return p.f.names
		}
		if p.edsNames == nil {
			for _, c := range p.f.churn.subsOf(p.id) {
				p.edsNames = append(p.edsNames, p.f.prefix+clusterName(c))
			}
		}
		return p.edsNames
	case xdstype.RouteURL:
		return []string{"main"}
	}
	return nil
}

// onResponse records what a proxy got, and subscribes like Envoy: EDS for
// its clusters after CDS, RDS for its listener's routes after LDS.
func (p *proxy) onResponse(url string) {
	f := p.f
	switch url {
	case xdstype.ClusterURL:
		p.have |= hasCDS
		if !slices.Contains(p.subs, xdstype.EndpointURL) {
			p.subscribe(xdstype.EndpointURL)
		}
	case xdstype.ListenerURL:
		p.have |= hasLDS
		if !slices.Contains(p.subs, xdstype.RouteURL) {
			p.subscribe(xdstype.RouteURL)
		}
	case xdstype.EndpointURL:
		p.have |= hasEDS
		if e := f.epoch.Load(); p.edsEpoch < e && p.have == hasCDS|hasEDS|hasLDS|hasRDS {
			p.edsEpoch = e
			f.edsSeen.Add(1)
			f.mu.Lock()
			f.lat = append(f.lat, time.Since(f.started))
			f.mu.Unlock()
		}
	case xdstype.RouteURL:
		p.have |= hasRDS
		if e := f.epoch.Load(); p.rdsEpoch < e && p.have == hasCDS|hasEDS|hasLDS|hasRDS {
			p.rdsEpoch = e
			f.rdsSeen.Add(1)
			f.mu.Lock()
			f.rlat = append(f.rlat, time.Since(f.started))
			f.mu.Unlock()
		}
	}
	if p.have == hasCDS|hasEDS|hasLDS|hasRDS && !p.readied {
		p.readied = true
		p.edsEpoch, p.rdsEpoch = f.epoch.Load(), f.epoch.Load()
		f.ready.Add(1)
		if w := time.Since(p.opened).Nanoseconds(); w > f.waitMax.Load() {
			f.waitMax.Store(w)
		}
	}
}
