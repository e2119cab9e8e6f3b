// Package upstream is the relay's client of the control plane above it:
// one delta ADS stream per aggregation key, which subscribes to what the
// key's downstream proxies need, keeps what the upstream sent, ACKs what
// it can pass down and NACKs what it cannot, and reports downstream NACKs
// back up. The stream reconnects with backoff, fails over across the
// upstream addresses in order, and resumes with what it holds
// (initial_resource_versions), so that a reconnect resends nothing that
// did not change.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type is one resource type the client subscribes to: everything of it
// (Wildcard: Listener, Cluster) or the names SetNames gives.
type Type struct {
	URL      string
	Wildcard bool
	// Check decodes and checks one resource of the type and returns its
	// name; an error refuses the whole response (a NACK).
	Check func(a *anypb.Any) (name string, err error)
	// Aliased: a resource is also subscribed under its aliases, and a
	// name answered without a resource is one the upstream does not have
	// (VHDS: an alias is answered with the virtual host serving it).
	Aliased bool
}

// subscribed reports whether names (sorted) take a resource named n of
// t, sent for aliases.
func (t Type) subscribed(names []string, n string, aliases []string) bool {
	if _, ok := slices.BinarySearch(names, n); ok || t.Wildcard || wildcard(names) {
		return true
	}
	for _, a := range aliases {
		if _, ok := slices.BinarySearch(names, a); ok {
			return true
		}
	}
	return false
}

// Resource is one resource as the upstream sent it.
type Resource struct {
	Version string
	Any     *anypb.Any
	// Aliases are the names it was sent for besides its own (Aliased
	// types).
	Aliases []string
	// TTL is the resource's TTL as the upstream sent it (X41; zero:
	// none): the relay serves it with it, and holds it as long as the
	// upstream refreshes it (expire).
	TTL time.Duration
}

// MaxTTL bounds a resource's TTL: a response with a longer one is
// NACKed.
const MaxTTL = 24 * time.Hour

// State is what the client holds: by type URL, then name. A State handed
// out is never changed: the client replaces a type's map on each change.
type State map[string]map[string]Resource

// Options configure a Client.
type Options struct {
	// Addrs are the upstream addresses, tried in order: a stream that
	// fails moves to the next.
	Addrs []string
	// Known are every address the relay may dial: a refusal by a shard
	// that does not serve the key's group, naming one of them as the
	// shard that does, is retried there.
	Known []string
	// Dial returns a connection to an address for one stream, and its
	// release once the stream ends (a Pool's Conn).
	Dial func(addr string) (conn *grpc.ClientConn, release func(), err error)
	// Node is the node the stream announces.
	Node  *corev3.Node
	Types []Type
	// Resume is what the client held before (the relay's data folder): it
	// is told to the upstream on the first stream, which then sends only
	// what changed.
	Resume State
	// MaxResources bounds what one key holds, over every type (default
	// 100,000): a response past it is NACKed.
	MaxResources int
	// MinBackoff and MaxBackoff bound the wait between failed streams
	// (defaults 100ms and 5s, doubling, with jitter).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// OnChange is called, on the client's goroutine, after each response
	// that changed the state. It must not block.
	OnChange func()
}

// Client is one key's upstream stream.
type Client struct {
	o     Options
	types map[string]Type
	kick  chan struct{}

	mu    sync.Mutex
	state State
	names map[string][]string // the named types' subscription, wanted ("*" among them: everything)
	// gone are the names subscribed by name that the upstream said it
	// does not have (removed_resources), by type.
	gone map[string]map[string]bool
	// dropped are the names SetNames let go of what it held, by type: one
	// subscribed again before the stream told the upstream is asked for
	// again (update), or the upstream, taking it as still held, would
	// never resend it.
	dropped map[string]map[string]bool
	reports map[string]string // downstream NACKs to report, by type
	// sysVersion is the upstream's system_version_info of each type;
	// nacked the version last reported NACKed (one NACK per version).
	sysVersion, nacked map[string]string
	addr               string
	connected          bool
	streams            int
	// refused is the last refusal by a shard not serving the key's group.
	refused string
	// warned is, by type (refusalKey), the version whose refusal was
	// last logged as a warning: a repeat of it is logged at debug.
	warned map[string]string
	// refreshed is when the upstream last sent or heartbeated each
	// resource held with a TTL, by type and name (ttl.go); again the
	// names it heartbeated that the client no longer holds, to ask for
	// again. ttlKick wakes the expiry for a new deadline.
	refreshed map[string]map[string]time.Time
	again     map[string]map[string]bool
	ttlKick   chan struct{}
}

// New returns a client; Run runs it.
func New(o Options) *Client {
	if o.MaxResources <= 0 {
		o.MaxResources = 100000
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		o: o, types: map[string]Type{}, kick: make(chan struct{}, 1),
		state: State{}, names: map[string][]string{}, gone: map[string]map[string]bool{}, dropped: map[string]map[string]bool{}, reports: map[string]string{},
		sysVersion: map[string]string{}, nacked: map[string]string{}, warned: map[string]string{},
		refreshed: map[string]map[string]time.Time{}, again: map[string]map[string]bool{}, ttlKick: make(chan struct{}, 1),
	}
	now := time.Now()
	for _, t := range o.Types {
		c.types[t.URL] = t
		if held := o.Resume[t.URL]; len(held) > 0 {
			c.state[t.URL] = maps.Clone(held)
			for n, r := range held {
				if r.TTL > 0 {
					c.refresh(t.URL, n, now)
				}
			}
		}
	}
	return c
}

// State returns what the client holds now. Do not modify it.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.state)
}

// Connected reports whether a stream is up and on which address, and how
// many streams the client has opened.
func (c *Client) Connected() (addr string, up bool, streams int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr, c.connected, c.streams
}

// Answered reports whether the upstream has answered the type at all,
// on this stream or an earlier one.
func (c *Client) Answered(typeURL string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sysVersion[typeURL]
	return ok
}

// SetNames sets what a named type subscribes to, "*" among the names
// for everything of it; the stream subscribes and unsubscribes the
// difference. What is no longer subscribed is no longer held. It reports
// whether it let go of a resource it held.
func (c *Client) SetNames(typeURL string, names []string) (dropped bool) {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	c.mu.Lock()
	same := slices.Equal(c.names[typeURL], names)
	c.names[typeURL] = names
	if held := c.state[typeURL]; !same && len(held) > 0 && !wildcard(names) {
		kept := make(map[string]Resource, len(held))
		for n, r := range held {
			if c.types[typeURL].subscribed(names, n, r.Aliases) {
				kept[n] = r
			} else {
				c.drop(typeURL, n)
				dropped = true
			}
		}
		c.state[typeURL] = kept
	}
	for n := range c.gone[typeURL] {
		if _, ok := slices.BinarySearch(names, n); !ok {
			delete(c.gone[typeURL], n)
		}
	}
	c.mu.Unlock()
	if !same {
		c.poke()
	}
	return dropped
}

// drop records that n of url was let go of (dropped); mu is held.
func (c *Client) drop(url, n string) {
	if c.dropped[url] == nil {
		c.dropped[url] = map[string]bool{}
	}
	c.dropped[url][n] = true
}

// wildcard reports whether names, sorted, subscribe to everything.
func wildcard(names []string) bool { return len(names) > 0 && names[0] == "*" }

// Gone reports whether the upstream said it has no name of typeURL,
// subscribed by name: it will not come unless the upstream gets it.
func (c *Client) Gone(typeURL, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone[typeURL][name]
}

// ReportNACK reports a downstream NACK of typeURL upstream: the stream
// asks for one of the type's resources again and answers that response
// with a NACK carrying detail. Once per upstream version of the type: a
// NACK of a version already reported is dropped.
func (c *Client) ReportNACK(typeURL, detail string) bool {
	c.mu.Lock()
	v, ok := c.sysVersion[typeURL]
	if !ok || c.nacked[typeURL] == v || len(c.state[typeURL]) == 0 {
		c.mu.Unlock()
		return false
	}
	c.nacked[typeURL] = v
	c.reports[typeURL] = detail
	c.mu.Unlock()
	c.poke()
	return true
}

func (c *Client) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run keeps a stream up until ctx ends: on a failure it waits (backoff)
// and tries the next address. Meanwhile, through outages too, what the
// upstream stops refreshing expires at its TTL (ttl.go).
func (c *Client) Run(ctx context.Context) error {
	if len(c.o.Addrs) == 0 {
		return errors.New("upstream: no address")
	}
	ectx, stopExpiry := context.WithCancel(ctx)
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		c.expireLoop(ectx)
	}()
	defer func() {
		stopExpiry()
		<-expired
	}()
	backoff := c.o.MinBackoff
	failing := false
	redirect := ""
	for i := 0; ; i = (i + 1) % len(c.o.Addrs) {
		addr, redirected := c.o.Addrs[i], redirect != ""
		if redirected {
			addr, redirect = redirect, ""
			i-- // the listed order resumes where it was
		}
		got, err := c.stream(ctx, addr)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			backoff, failing = c.o.MinBackoff, false
			if !redirected {
				c.noteRefusal(ctx, "") // the key's own upstreams serve it
			}
		}
		if shown, next := c.refusal(addr, err); shown != "" {
			redirect = next
			c.noteRefusal(ctx, shown)
		}
		// Said once per outage, not at every retry of every key.
		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}
		failing = true
		c.o.Logger.Log(ctx, level, "upstream stream ended; trying the next upstream", "upstream", addr, "err", err, "retry_in", backoff.String())
		t := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.o.MaxBackoff)
	}
}

// noteRefusal keeps a shard's refusal for the key's status and logs it,
// once while it says the same: a misrouted key is an operator's to fix
// (--upstream-for).
func (c *Client) noteRefusal(ctx context.Context, shown string) {
	c.mu.Lock()
	same := c.refused == shown
	c.refused = shown
	c.mu.Unlock()
	if !same && shown != "" {
		c.o.Logger.Log(ctx, slog.LevelWarn, "relay key misrouted: its upstream serves other groups (check --upstream-for)", "node", c.o.Node.GetId(), "refusal", shown)
	}
}

// jitter is d less up to a fifth, so that many keys' streams failing
// together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(time.Now().UnixNano()%int64(d/5+1))
}

// recvd is what the reader hands the stream's loop.
type recvd struct {
	resp *discoveryv3.DeltaDiscoveryResponse
	err  error
}

// stream runs one stream on addr until it fails or ctx ends; got reports
// whether the upstream answered at all.
func (c *Client) stream(ctx context.Context, addr string) (got bool, err error) {
	conn, release, err := c.o.Dial(addr)
	if err != nil {
		return false, err
	}
	defer release()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(sctx)
	if err != nil {
		return false, err
	}
	s := &session{c: c, cs: cs, sent: map[string][]string{}, refusing: map[string]int{}, held: map[string]heldNACK{}}
	defer s.stopTimer()
	if err := s.start(); err != nil {
		return false, err
	}
	c.mu.Lock()
	c.addr, c.streams = addr, c.streams+1
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.connected = false
		c.mu.Unlock()
	}()
	in := make(chan recvd, 1)
	go func() {
		defer close(in)
		for {
			resp, err := cs.Recv()
			select {
			case in <- recvd{resp, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range in { // the reader ends with the stream's context
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case r := <-in:
			if r.err != nil {
				return got, r.err
			}
			if !got {
				got = true
				c.mu.Lock()
				c.connected = true
				c.mu.Unlock()
				c.o.Logger.Info("upstream stream up", "upstream", addr, "node", c.o.Node.GetId())
			}
			if err := s.handle(r.resp); err != nil {
				return got, err
			}
		case <-c.kick:
			if err := s.update(); err != nil {
				return got, err
			}
		case <-s.due():
			if err := s.flush(); err != nil {
				return got, err
			}
		}
	}
}

// session is one stream's state: what it subscribed by name, and which
// types are waiting for a resend to NACK.
type session struct {
	c     *Client
	cs    discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	first bool
	sent  map[string][]string
	// nack holds, by type, the detail the next response of the type is
	// answered with.
	nack map[string]string
	// refusing is, by type (refusalKey), how many responses in a row the
	// client refused; held, the NACKs waiting out their backoff; timer
	// fires when the earliest is due.
	refusing map[string]int
	held     map[string]heldNACK
	timer    *time.Timer
}

// start sends each type's first request: the wildcard or the names, and
// what the client holds of it.
func (s *session) start() error {
	c := s.c
	c.mu.Lock()
	clear(c.dropped) // a new stream asks for every name
	clear(c.again)
	var reqs []*discoveryv3.DeltaDiscoveryRequest
	for _, t := range c.o.Types {
		var sub []string
		if t.Wildcard {
			// "*" said outright: a name subscribed later (a NACK's resend)
			// must not end a legacy wildcard.
			sub = []string{"*"}
		} else {
			sub = c.names[t.URL]
			s.sent[t.URL] = sub
			if len(sub) == 0 {
				continue
			}
		}
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.URL, ResourceNamesSubscribe: sub}
		if held := c.state[t.URL]; len(held) > 0 {
			req.InitialResourceVersions = make(map[string]string, len(held))
			for n, r := range held {
				// A TTL'd resource is not claimed: the upstream sends it
				// again, refreshing it at once rather than at its next
				// heartbeat, which could come after it expired here.
				if r.TTL == 0 {
					req.InitialResourceVersions[n] = r.Version
				}
			}
		}
		reqs = append(reqs, req)
	}
	c.mu.Unlock()
	for _, req := range reqs {
		if err := s.send(req); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) send(req *discoveryv3.DeltaDiscoveryRequest) error {
	if !s.first {
		s.first = true
		req.Node = s.c.o.Node
	}
	return s.cs.Send(req)
}

// update sends the named types' subscription changes and asks again for a
// resource of each type with a downstream NACK to report.
func (s *session) update() error {
	c := s.c
	c.mu.Lock()
	var reqs []*discoveryv3.DeltaDiscoveryRequest
	for _, t := range c.o.Types {
		if t.Wildcard {
			if again := c.askAgain(t.URL, nil, nil); len(again) > 0 {
				reqs = append(reqs, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.URL, ResourceNamesSubscribe: again})
			}
			continue
		}
		want := c.names[t.URL]
		sub, unsub := diff(s.sent[t.URL], want)
		for n := range c.dropped[t.URL] {
			_, still := slices.BinarySearch(want, n)
			if _, sent := slices.BinarySearch(s.sent[t.URL], n); still && sent {
				sub = append(sub, n) // dropped and wanted again meanwhile
			}
		}
		delete(c.dropped, t.URL)
		sub = c.askAgain(t.URL, want, sub)
		if len(sub)+len(unsub) > 0 {
			s.sent[t.URL] = want
			reqs = append(reqs, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.URL, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub})
		}
	}
	for url, detail := range c.reports {
		delete(c.reports, url)
		names := slices.Sorted(maps.Keys(c.state[url]))
		if len(names) == 0 {
			continue
		}
		if s.nack == nil {
			s.nack = map[string]string{}
		}
		// A name subscribed again is sent again (the xDS spec; Pylon's
		// X29): its response is the one answered with the NACK.
		s.nack[url] = detail
		reqs = append(reqs, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: url, ResourceNamesSubscribe: names[:1]})
	}
	c.mu.Unlock()
	for _, req := range reqs {
		if err := s.send(req); err != nil {
			return err
		}
	}
	return nil
}

// diff is what to subscribe and unsubscribe to go from have to want, both
// sorted.
func diff(have, want []string) (sub, unsub []string) {
	for _, n := range want {
		if _, ok := slices.BinarySearch(have, n); !ok {
			sub = append(sub, n)
		}
	}
	for _, n := range have {
		if _, ok := slices.BinarySearch(want, n); !ok {
			unsub = append(unsub, n)
		}
	}
	return sub, unsub
}

// handle applies a response and answers it: a NACK naming the problem
// when it cannot be passed down (the state keeps what it was), else an
// ACK, or the NACK of a downstream NACK being reported.
func (s *session) handle(resp *discoveryv3.DeltaDiscoveryResponse) error {
	c := s.c
	url := resp.GetTypeUrl()
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: url, ResponseNonce: resp.GetNonce()}
	changed, err := c.apply(resp)
	if err != nil {
		key := c.refusalKey(url)
		c.logRefusal(key, url, resp.GetSystemVersionInfo(), err)
		ack.ErrorDetail = errorDetail(err.Error())
		s.refusing[key]++
		if n := s.refusing[key]; n > 1 {
			s.hold(key, ack, c.nackBackoff(n))
			return nil
		}
	} else if detail, ok := s.nack[url]; ok {
		delete(s.nack, url)
		ack.ErrorDetail = errorDetail(detail)
	}
	if err == nil {
		// A response passed: the refusals in a row end, and a held NACK
		// answers a nonce this one supersedes.
		delete(s.refusing, url)
		delete(s.held, url)
	}
	if err := s.send(ack); err != nil {
		return err
	}
	if changed && c.o.OnChange != nil {
		c.o.OnChange()
	}
	return nil
}

// markGone records that the upstream has no n of url, if subscribed by
// name, and reports whether that is news; mu is held.
func (c *Client) markGone(url, n string) bool {
	if _, ok := slices.BinarySearch(c.names[url], n); !ok || c.gone[url][n] {
		return false
	}
	if c.gone[url] == nil {
		c.gone[url] = map[string]bool{}
	}
	c.gone[url][n] = true
	return true
}

// apply checks resp whole and, if it passes, makes it the state.
func (c *Client) apply(resp *discoveryv3.DeltaDiscoveryResponse) (changed bool, err error) {
	url := resp.GetTypeUrl()
	t, ok := c.types[url]
	if !ok {
		return false, fmt.Errorf("type %q was not subscribed to", cut(url))
	}
	add, none, beats, err := decodeResources(t, url, resp.GetResources())
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := maps.Clone(c.state[url])
	if next == nil {
		next = map[string]Resource{}
	}
	for _, n := range resp.GetRemovedResources() {
		if _, ok := next[n]; ok {
			delete(next, n)
			changed = true
		}
	}
	for n, r := range add {
		if !t.subscribed(c.names[url], n, r.Aliases) {
			c.drop(url, n) // not subscribed (any more): not kept
			continue
		}
		if old, ok := next[n]; !ok || old.Version != r.Version || r.Version == "" || old.TTL != r.TTL {
			changed = true
		}
		next[n] = r
	}
	total := len(next)
	for u, m := range c.state {
		if u != url {
			total += len(m)
		}
	}
	if total > c.o.MaxResources {
		return false, fmt.Errorf("the relay holds at most %d resources for one key (its bound), and this response makes %d", c.o.MaxResources, total)
	}
	c.state[url] = next
	c.sysVersion[url] = resp.GetSystemVersionInfo()
	c.refreshAll(url, add, beats)
	for n, r := range add {
		delete(c.gone[url], n)
		for _, a := range r.Aliases {
			delete(c.gone[url], a)
		}
	}
	for _, n := range append(none, resp.GetRemovedResources()...) {
		if c.markGone(url, n) {
			changed = true // what waits for it need not
		}
	}
	return changed, nil
}

// decodeResources checks a response's resources of t: what it adds, the
// names it answers without a resource (an alias nothing serves) and its
// heartbeats (a name's TTL, nothing else).
func decodeResources(t Type, url string, rs []*discoveryv3.Resource) (add map[string]Resource, none, beats []string, err error) {
	add = make(map[string]Resource, len(rs))
	for i, r := range rs {
		a := r.GetResource()
		if a == nil {
			if t.Aliased && len(r.GetAliases()) > 0 {
				none = append(none, r.GetName())
			} else {
				beats = append(beats, r.GetName())
			}
			continue
		}
		if a.GetTypeUrl() != url {
			return nil, nil, nil, fmt.Errorf("resources[%d] (%q): type %q in a response of %q", i, cut(r.GetName()), cut(a.GetTypeUrl()), cut(url))
		}
		name, err := t.Check(a)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("resources[%d] (%q): %w", i, cut(r.GetName()), err)
		}
		if r.GetName() != "" && r.GetName() != name {
			return nil, nil, nil, fmt.Errorf("resources[%d]: named %q but holds %q", i, cut(r.GetName()), cut(name))
		}
		ttl := r.GetTtl().AsDuration()
		if r.GetTtl() != nil && (ttl <= 0 || ttl > MaxTTL) {
			return nil, nil, nil, fmt.Errorf("resources[%d] (%q): a TTL of %v; the relay takes 0 to %v", i, cut(r.GetName()), ttl, MaxTTL)
		}
		res := Resource{Version: r.GetVersion(), Any: a, TTL: ttl}
		if t.Aliased {
			res.Aliases = slices.Clone(r.GetAliases())
		}
		add[name] = res
	}
	return add, none, beats, nil
}
