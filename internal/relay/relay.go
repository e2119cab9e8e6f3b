// Package relay is `pylon relay`'s engine: downstream proxies are grouped
// by an aggregation key (a template over node fields), each key is a node
// group of the relay's own fleet, and each key's config comes from one
// upstream delta ADS stream (package upstream) instead of a config source.
// The relay subscribes upstream to what the key's proxies need (every
// Listener and Cluster, and the routes, endpoints and extension configs
// they name or its proxies ask for: asked.go), builds a snapshot of it, publishes the fleet of every key to
// a fleet.Publisher the xDS server reads, keeps each key's last good
// resources in its data folder, and reports downstream NACKs upstream.
// Secrets are never relayed (see docs/relay.md).
package relay

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Options configure a Relay.
type Options struct {
	// Upstreams are the upstream xDS addresses, in order of preference.
	Upstreams []string
	// Routes send the keys their selectors take to other upstreams (the
	// shards serving those groups), the first route taking a key winning.
	Routes []Route
	// Pool dials them (TLS as configured).
	Pool     *upstream.Pool
	Template Template
	// Groups, when set, are a Pylon upstream's group rules: each proxy is
	// keyed by the group the upstream would put it in, not by Template.
	Groups *GroupRules
	// ID is the relay's own node id prefix upstream: each key's stream
	// announces ID/KEY.
	ID        string
	Registry  *xdstype.Registry
	Publisher *fleet.Publisher
	// DataDir, when set, keeps each key's last good resources, so that a
	// relay restarted while the upstream is away serves at once.
	DataDir string
	// MaxKeys bounds the keys (default 1,000): a proxy of a new key past
	// it is refused with RESOURCE_EXHAUSTED.
	MaxKeys int
	// IdleKey is how long a key no proxy uses lives on (default 5m): its
	// upstream stream and group go after.
	IdleKey time.Duration
	// MaxResources bounds one key's resources (upstream.Options).
	MaxResources int
	// Settle is how long a build waits for names it subscribed to arrive
	// before it builds without them (default 1s).
	Settle time.Duration
	// MinBackoff and MaxBackoff: see upstream.Options.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// DefaultMaxKeys is MaxKeys's default.
const DefaultMaxKeys = 1000

// Relay is the relay's engine.
type Relay struct {
	o     Options
	types []upstream.Type
	// named are the types subscribed by name (not whole): what a proxy
	// asks for of them is subscribed for its key (asked.go).
	named map[string]bool

	// pubMu orders publishes: the fleet made last is the one published
	// last. mu is not held across a publish, whose callbacks wake the
	// streams.
	pubMu sync.Mutex
	mu    sync.Mutex
	ctx   context.Context
	keys  map[string]*keyState
	wg    sync.WaitGroup
	// status is what /status shows of the relay's fleet.
	status Status
	// droppedStreams counts the upstream streams of keys dropped since;
	// nacks the downstream NACKs reported upstream.
	droppedStreams uint64
	nacks          atomic.Uint64
	// pending are group rules read since the fleet's were applied
	// (rekey.go): the keys' rules change once every key with proxies has
	// its config, so that a proxy moved to a new key never waits in no
	// group.
	pending nodegroup.Groups
}

// keyState is one key: its upstream stream, its proxies, its snapshot.
type keyState struct {
	key    Key
	client *upstream.Client
	stop   context.CancelFunc
	kick   chan struct{}
	// done is closed once the key's stream and builds have ended.
	done chan struct{}
	// streams counts the downstream streams of the key; idleSince is when
	// it last fell to zero. members are the streams' nodes, with group
	// keys only: a change of the rules moves them (rekey.go).
	streams int
	members map[*member]struct{}
	// stale: the key's stream announces a node the upstream's rules now
	// put in another group, and no proxy used it then (rekey.go).
	stale bool
	// movedFrom: a change of the rules not applied yet moved proxies out
	// of the key; they are its group's in the fleet until it applies.
	movedFrom bool
	// shown is closed once the key's group is in the fleet published.
	shown     chan struct{}
	showDone  bool
	idleSince time.Time
	// born is when the key was made: without its first config it holds
	// back others' groups at most maxGroupWait past it (groups.go).
	born time.Time
	// snap is the key's last good snapshot (nil before its first);
	// heldBack what its last build left out, and why.
	snap     *snapshot.Snapshot
	heldBack []string
	valid    *snapshot.Validated
	// kept is what the key's file last kept, by type URL (persist.go),
	// touched only by the key's builds.
	kept map[string][]keptResource
	// asked is what the key's proxies ask for of each named type, and
	// askedNames how many distinct names, at most maxAsked (asked.go).
	asked      map[string]*asked
	askedNames int
	maxAsked   int
	// iter numbers the key's builds as they begin; quietIter is the last
	// over, and quiet is closed (and made again) when one is over: a
	// proxy waits for a build after what it asked for (awaitBuild).
	// served is the snapshot of the key last published.
	iter, quietIter uint64
	quiet           chan struct{}
	served          *snapshot.Snapshot
	// subscribed is what the key's builds last subscribed to by name, by
	// type, and pending what of it they wait for (build.go); touched only
	// by the key's builds.
	subscribed map[string][]string
	pending    map[resourceID]bool
	// namespaces are the VHDS names asked for that were route
	// configurations at the last build (aliasesAgain).
	namespaces map[string]bool
	// keptAliases are the VHDS aliases the key's file kept virtual hosts
	// for: subscribed as if asked for until the key's upstream stream is
	// up, so that a relay restarted during an outage serves them to the
	// proxies that come back asking (build.go); touched only by the key's
	// builds.
	keptAliases []string
}

// New returns a relay; Start it before serving.
func New(o Options) *Relay {
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.IdleKey <= 0 {
		o.IdleKey = 5 * time.Minute
	}
	if o.MaxResources <= 0 {
		o.MaxResources = 100000 // upstream.Options' default, which the kept files are held to as well
	}
	if o.Settle <= 0 {
		o.Settle = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Groups != nil {
		o.Groups.Changed() // made now: a change read before Run waits for it
	}
	r := &Relay{o: o, types: relayedTypes(o.Registry), keys: map[string]*keyState{}, named: map[string]bool{}}
	for _, t := range r.types {
		if !t.Wildcard {
			r.named[t.URL] = true
		}
	}
	return r
}

// relayedTypes are the types the relay subscribes to: the wildcard types
// whole, and the routes, endpoints and extension configs by name. Runtime
// layers whole too ("*" said outright): a proxy names them in its
// bootstrap, which the relay never sees, and no other resource names
// them, so subscribing by name would leave every layer unasked; a key's
// layers are few, and the key's identity upstream is entitled to them as
// to its listeners. VirtualHosts by the aliases the key's proxies ask
// for (VHDS, on demand), each kept under its own name with the aliases
// it was sent for. Not Secrets (a relay cannot prove a downstream proxy's
// entitlement to a key the upstream gave the relay).
func relayedTypes(reg *xdstype.Registry) []upstream.Type {
	var out []upstream.Type
	for _, t := range reg.Ranked() {
		switch t.URL {
		case xdstype.SecretURL:
			continue
		}
		whole := t.Wildcard || t.URL == xdstype.RuntimeURL
		out = append(out, upstream.Type{URL: t.URL, Wildcard: whole, Check: checker(t), Aliased: t.URL == xdstype.VirtualHostURL})
	}
	return out
}

// Start loads the keys kept in the data folder, publishes them and starts
// their upstream streams: a relay restarted during an upstream outage
// serves at once. ctx bounds every key's stream.
func (r *Relay) Start(ctx context.Context) error {
	loaded, err := r.load()
	if err != nil {
		return err
	}
	now := time.Now()
	r.mu.Lock()
	r.ctx = ctx
	var fresh []*keyState
	for _, l := range loaded {
		if len(r.keys) >= r.o.MaxKeys {
			break
		}
		ks := r.newKey(l.key, l.state)
		ks.idleSince = now
		ks.keptAliases = l.aliases
		fresh = append(fresh, ks)
	}
	r.mu.Unlock()
	for _, ks := range fresh {
		state, inputs, _ := r.subscribeNow(ks)
		r.build(ks, state, inputs)
	}
	r.publish(now)
	r.mu.Lock()
	for _, ks := range fresh {
		r.goKey(ks)
	}
	r.mu.Unlock()
	return nil
}

// Run removes the keys left idle until ctx ends, then waits for the keys'
// streams to end.
func (r *Relay) Run(ctx context.Context) error {
	tick := time.NewTicker(min(r.o.IdleKey/2, 30*time.Second))
	defer tick.Stop()
	var rulesChanged <-chan struct{}
	if r.o.Groups != nil {
		rulesChanged = r.o.Groups.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case now := <-tick.C:
			r.sweep(now)
		case <-rulesChanged:
			r.rekey(time.Now())
		}
	}
}

// Close ends every key's upstream stream and waits for them; Run does it
// when its context ends.
func (r *Relay) Close() { r.stopAll() }

func (r *Relay) stopAll() {
	r.mu.Lock()
	for _, ks := range r.keys {
		if ks.stop != nil {
			ks.stop()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// sweep drops the keys no proxy has used for IdleKey.
func (r *Relay) sweep(now time.Time) {
	r.mu.Lock()
	var gone []*keyState
	for name, ks := range r.keys {
		// A key its proxies moved out of serves them still until the
		// rules that moved them apply.
		if ks.streams == 0 && now.Sub(ks.idleSince) >= r.o.IdleKey && (r.pending == nil || !ks.movedFrom) {
			ks.stop()
			delete(r.keys, name)
			gone = append(gone, ks)
		}
	}
	r.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	r.publish(now)
	for _, ks := range gone {
		r.countDropped(ks)
		// Its builds over, nothing writes its file again; unless a proxy
		// brought the key back meanwhile.
		<-ks.done
		r.mu.Lock()
		back := r.keys[ks.key.Name] != nil
		r.mu.Unlock()
		r.o.Logger.Info("relay key dropped: no proxy used it", "key", ks.key.Name, "idle", r.o.IdleKey.String())
		if !back {
			r.forget(ks.key.Name)
		}
	}
}

// newKey adds a key, its upstream stream not yet started; mu is held.
func (r *Relay) newKey(k Key, resume upstream.State) *keyState {
	ks := &keyState{
		key: k, kick: make(chan struct{}, 1), done: make(chan struct{}), shown: make(chan struct{}), valid: &snapshot.Validated{},
		quiet: make(chan struct{}), maxAsked: r.o.MaxResources, born: time.Now(),
	}
	ks.client = upstream.New(upstream.Options{
		Addrs: r.upstreamsOf(k.Name), Known: r.known(), Dial: r.o.Pool.Conn, Node: k.Node(r.o.ID), Types: r.types,
		Resume: resume, MaxResources: r.o.MaxResources, MinBackoff: r.o.MinBackoff, MaxBackoff: r.o.MaxBackoff,
		Logger: r.o.Logger.With("key", k.Name),
		OnChange: func() {
			select {
			case ks.kick <- struct{}{}:
			default:
			}
		},
	})
	r.keys[k.Name] = ks
	return ks
}

// goKey starts the key's upstream stream and its builds; mu is held.
func (r *Relay) goKey(ks *keyState) {
	ctx, stop := context.WithCancel(r.ctx)
	ks.stop = stop
	var both sync.WaitGroup
	both.Add(2)
	r.wg.Add(1)
	go func() {
		defer both.Done()
		_ = ks.client.Run(ctx)
	}()
	go func() {
		defer both.Done()
		r.runKey(ctx, ks)
	}()
	go func() {
		defer r.wg.Done()
		both.Wait()
		close(ks.done)
	}()
}

// runKey builds the key's snapshot after each upstream change. While
// names it subscribed to have not arrived it waits, up to Settle, so that
// a change and what it names reach the proxies together.
func (r *Relay) runKey(ctx context.Context, ks *keyState) {
	var settle *time.Timer
	var settleC <-chan time.Time
	var waiting time.Time
	// Its wait for a first config over, what it held back is published.
	bounded := time.NewTimer(maxGroupWait)
	defer func() {
		bounded.Stop()
		if settle != nil {
			settle.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ks.kick:
		case <-settleC:
			settleC = nil
		case now := <-bounded.C:
			r.mu.Lock()
			none := ks.snap == nil
			r.mu.Unlock()
			if none && r.o.Groups != nil {
				r.publish(now)
			}
			continue
		}
		r.mu.Lock()
		ks.iter++
		it := ks.iter
		r.mu.Unlock()
		state, inputs, missing := r.subscribeNow(ks)
		missing = missing || !r.firstWhole(ks)
		now := time.Now()
		if missing && settleC == nil {
			if waiting.IsZero() {
				waiting = now
			}
			if left := r.o.Settle - now.Sub(waiting); left > 0 {
				settle = time.NewTimer(left)
				settleC = settle.C
				continue
			}
		}
		if missing && settleC != nil {
			continue
		}
		waiting = time.Time{}
		if settle != nil {
			// Built: a timer left from an earlier wait must not stand
			// for the next one's (which would then wait twice).
			settle.Stop()
			settleC = nil
		}
		clear(ks.pending) // waited for long enough: served without
		if r.build(ks, state, inputs) {
			r.publish(now)
		}
		r.built(ks, it)
	}
}

// firstWhole reports whether the key may publish: once it has a snapshot,
// always; before, once the upstream answered every wildcard type, so that
// a key's first proxies get its whole config at once rather than the
// types in the order they came.
func (r *Relay) firstWhole(ks *keyState) bool {
	r.mu.Lock()
	has := ks.snap != nil
	r.mu.Unlock()
	if has {
		return true
	}
	for _, t := range r.types {
		if t.Wildcard && !ks.client.Answered(t.URL) {
			return false
		}
	}
	return true
}

// snapshotKeys are the keys now, in name order.
func (r *Relay) snapshotKeys() []*keyState {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := slices.Sorted(maps.Keys(r.keys))
	out := make([]*keyState, len(names))
	for i, n := range names {
		out[i] = r.keys[n]
	}
	return out
}

// publish makes the fleet of every key with a snapshot current: a group
// per key, matching the key's fields exactly.
func (r *Relay) publish(at time.Time) {
	var rules nodegroup.Groups
	var snaps []*snapshot.Snapshot
	var groups []GroupStatus
	var held []string
	var shown, in []*keyState
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.mu.Lock()
	r.applyPending(at)
	order, blocked := r.published(at)
	for _, ks := range order {
		name := ks.key.Name
		for _, h := range ks.heldBack {
			held = append(held, name+": "+h)
		}
		if ks.snap == nil || blocked[ks] || ks.stale && r.pending == nil {
			continue
		}
		rule := nodegroup.Group{Name: name, Match: ks.key.Match()}
		if ks.key.Group != nil {
			rule.Default = ks.key.Group.Default
		}
		rules = append(rules, rule)
		snaps = append(snaps, ks.snap)
		in = append(in, ks)
		if !ks.showDone {
			ks.showDone = true
			shown = append(shown, ks)
		}
		gs := GroupStatus{Name: name, Version: ks.snap.Version(), Resources: map[string]int{}}
		for _, set := range ks.snap.Sets() {
			if set.Len() > 0 {
				gs.Resources[set.Type().Kind] = set.Len()
			}
		}
		groups = append(groups, gs)
	}
	r.mu.Unlock()
	f := fleet.NewGroupedFleet(rules, snaps)
	f.AcceptedAt = at
	published := r.o.Publisher.Publish(f)
	for _, ks := range shown {
		close(ks.shown) // the fleet holding its group is current
	}
	r.mu.Lock()
	for i, ks := range in {
		ks.served = snaps[i] // the fleet holding it is current
	}
	if published {
		r.status.Version, r.status.AcceptedAt, r.status.PublishedAt, r.status.Groups = f.Version(), at, time.Now(), groups
	}
	r.status.HeldBack = held
	r.mu.Unlock()
}

// Status is the relay's fleet as the admin API's /status shows it.
type Status struct {
	Version                 string
	AcceptedAt, PublishedAt time.Time
	Groups                  []GroupStatus
	// HeldBack are the resources the keys' last builds left out, each as
	// "KEY: why".
	HeldBack []string
}

// GroupStatus is one key's group: its snapshot's version and how many
// resources of each kind it has.
type GroupStatus struct {
	Name      string
	Version   string
	Resources map[string]int
}

// Status is the relay's fleet: a group per key, and what the keys'
// builds held back.
func (r *Relay) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.Groups = slices.Clone(s.Groups)
	s.HeldBack = slices.Clone(s.HeldBack)
	return s
}

// KeyStatus is one key as the relay sees it.
type KeyStatus struct {
	Key      string `json:"key"`
	Upstream string `json:"upstream"`
	// Connected: the upstream stream is up and answered.
	Connected bool `json:"connected"`
	// Streams is the upstream streams the key opened (1 while it never
	// lost one); Proxies the downstream streams using it now.
	Streams int    `json:"upstreamStreams"`
	Proxies int    `json:"proxies"`
	Version string `json:"version,omitempty"`
	// Refused is the last refusal of the key by an upstream that does not
	// serve its group (another shard does): which upstream, what it said,
	// and whether the relay could retry where it pointed.
	Refused string `json:"refused,omitempty"`
}

// Stats are the relay's figures for its metrics.
type Stats struct {
	Keys, Connected, HeldBack      int
	UpstreamStreams, NACKsReported uint64
}

// Stats reads the relay's figures.
func (r *Relay) Stats() Stats {
	var s Stats
	for _, k := range r.Keys() {
		s.Keys++
		if k.Connected {
			s.Connected++
		}
		s.UpstreamStreams += uint64(k.Streams)
	}
	r.mu.Lock()
	s.UpstreamStreams += r.droppedStreams
	s.HeldBack = len(r.status.HeldBack)
	r.mu.Unlock()
	s.NACKsReported = r.nacks.Load()
	return s
}

// Keys lists the keys.
func (r *Relay) Keys() []KeyStatus {
	var out []KeyStatus
	for _, ks := range r.snapshotKeys() {
		addr, up, n := ks.client.Connected()
		r.mu.Lock()
		k := KeyStatus{Key: ks.key.Name, Upstream: addr, Connected: up, Streams: n, Proxies: ks.streams, Refused: ks.client.Refused()}
		if ks.snap != nil {
			k.Version = ks.snap.Version()
		}
		r.mu.Unlock()
		out = append(out, k)
	}
	return out
}
