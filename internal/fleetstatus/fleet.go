package fleetstatus

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd"
)

// Defaults.
const (
	DefaultPeriod = 5 * time.Second
	// Partial heads /proxies when the other replicas' proxies could not
	// be read: those shown are as of the last read, or none.
	Partial = "fleet status partial: etcd unreachable"
)

// Board is this replica's area in etcd (etcd.Board).
type Board interface {
	Put(ctx context.Context, shards [][]byte) error
	KeepAlive(ctx context.Context) (bool, error)
	Revoke(ctx context.Context) error
}

// Reader reads every replica's area (etcd.Store).
type Reader interface {
	Boards(ctx context.Context) (map[string][][]byte, error)
}

// Options configures a Fleet.
type Options struct {
	// Replica is this replica's id (control_plane.identifier).
	Replica string
	// Store is the etcd store the replicas share.
	Store *etcd.Store
	// Local lists this replica's streams (status.Tracker.Streams).
	Local func() []status.Stream
	// Period is how often the summary is published when it changed, the
	// lease renewed and the others' summaries read (default 5s).
	Period time.Duration
	// TTL is the summary's lease: how long a dead replica's proxies stay
	// listed (default 3 x Period).
	TTL time.Duration
	// MaxProxies bounds the streams published (default 20,000).
	MaxProxies int
	// Logger receives etcd trouble, once per change of state.
	Logger *slog.Logger
	// Self is what this replica publishes of itself: the groups it serves
	// (none: all) and its xDS address.
	Self Self
	// Draining, if set, says whether this replica is draining; published
	// as Self.Draining.
	Draining func() bool
	// Announce, if set, is closed when this replica starts draining: the
	// summary saying so is published at once, not a Period later, so that
	// the others do not count the replica among those sharing the proxies
	// it hands over (and refuse them on a count that includes it).
	Announce <-chan struct{}
	// Relays, if set, lists the reports of the relays reporting to this
	// replica (the admin API's), published with its proxies so that every
	// replica lists the proxies behind them (bounded: relays.go).
	Relays func() []Relay
}

// Fleet publishes this replica's summary and keeps the others'.
type Fleet struct {
	opts   Options
	board  Board
	reader Reader

	mu      sync.Mutex
	remote  []Remote
	relays  []RemoteRelay
	peers   []Peer
	partial string
	// readAt is when the others' summaries were last read; unread, why
	// the last read failed ("" when it did not).
	readAt time.Time
	unread string
	// published is the streams this replica's summary holds, as the
	// others read it (Load).
	published int
}

// Remote is a proxy stream served by another replica.
type Remote struct {
	Replica string
	// Groups are the node groups that replica serves (none: every group).
	Groups []string
	Proxy
	// ReadAt is when its summary was read. Stale: the last read failed,
	// so its state is as of ReadAt and may no longer hold.
	ReadAt time.Time
	Stale  bool
}

// New returns a Fleet; Run publishes and reads.
func New(o Options) *Fleet {
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.TTL <= 0 {
		o.TTL = 3 * o.Period
	}
	if o.MaxProxies <= 0 {
		o.MaxProxies = DefaultMaxProxies
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Fleet{opts: o, board: o.Store.Board(o.Replica, o.TTL), reader: o.Store}
}

// Remote returns the other replicas' proxies as last read, by node, and
// when they could not all be read, why ("" when they could). When etcd
// cannot be read, each is marked Stale and the reason says how old the
// list is: a proxy shown SYNCED a minute ago may have failed since.
func (f *Fleet) Remote() ([]Remote, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unread == "" {
		return f.remote, f.partial
	}
	asOf := "never read"
	if !f.readAt.IsZero() {
		asOf = "as last read " + time.Since(f.readAt).Round(time.Second).String() + " ago"
	}
	return f.remote, fmt.Sprintf("%s (%s); other replicas' proxies %s, their state unknown since", Partial, f.unread, asOf)
}

// Relays returns the reports of the relays reporting to the other
// replicas, as last read, by replica and relay; marked Stale as Remote's
// proxies are when etcd cannot be read.
func (f *Fleet) Relays() []RemoteRelay {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.relays
}

// Run publishes and reads every Period until ctx ends, then revokes the
// lease so that this replica's proxies leave the others' lists at once.
// etcd trouble is never fatal: local status keeps being served, and the
// next period tries again.
func (f *Fleet) Run(ctx context.Context) error {
	t := time.NewTicker(f.opts.Period)
	defer t.Stop()
	p := publisher{f: f}
	announce := f.opts.Announce
	for {
		if err := p.publish(ctx); errors.Is(err, store.ErrUnavailable) {
			// etcd did not take this replica's summary: the list is
			// partial from now, not from when the read below times out
			// too (as soon as the store says it is degraded).
			f.unreadable(err)
		}
		f.refresh(ctx)
		select {
		case <-ctx.Done():
			f.withdraw(ctx)
			return nil
		case <-t.C:
		case <-announce:
			announce = nil // closed: once
		}
	}
}

// withdraw revokes the lease, in a bounded call of its own: ctx is over.
func (f *Fleet) withdraw(ctx context.Context) {
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opts.Period)
	defer cancel()
	if err := f.board.Revoke(stop); err != nil {
		f.opts.Logger.Warn("fleet status: could not withdraw this replica's summary; it leaves when its lease expires", "ttl", f.opts.TTL.String(), "err", err)
	}
}

// publisher is the state of the publishing loop.
type publisher struct {
	f    *Fleet
	gen  uint64
	hash [32]byte
	bad  bool // the last attempt failed (logged once)
	// putAt is when the summary was last written.
	putAt time.Time
}

// relaysRefresh is how often a summary holding relays' reports is written
// again though only their times changed: a relay reports every few
// seconds, and writing every shard of the summary each Period for a new
// time alone would put megabytes into etcd's history for nothing.
const relaysRefresh = 30 * time.Second

// publish writes the summary when it changed or etcd lost it, and renews
// the lease otherwise. It returns why it could not.
func (p *publisher) publish(ctx context.Context) error {
	f := p.f
	var sum summary
	sum.proxies, sum.omitted = Summarize(f.opts.Local(), f.opts.MaxProxies)
	if f.opts.Relays != nil {
		sum.relays, sum.relaysOmitted = boundRelays(f.opts.Relays())
	}
	sum.self = f.opts.Self
	sum.self.Draining = f.opts.Draining != nil && f.opts.Draining()
	b, _ := json.Marshal(struct {
		P  []Proxy
		O  int
		R  []Relay
		RO int
		S  Self
	}{sum.proxies, sum.omitted, untimed(sum.relays), sum.relaysOmitted, sum.self})
	h := sha256.Sum256(b)
	alive, err := f.board.KeepAlive(ctx)
	stale := len(sum.relays) > 0 && time.Since(p.putAt) >= relaysRefresh
	if err == nil && (!alive || h != p.hash || stale) {
		err = p.put(ctx, sum, h)
	}
	if err == nil {
		f.mu.Lock()
		f.published = len(sum.proxies) + sum.omitted
		f.mu.Unlock()
	}
	p.report(err, sum.omitted)
	return err
}

func (p *publisher) put(ctx context.Context, sum summary, h [32]byte) error {
	p.gen++
	shards, err := encodeSummary(p.gen, sum.self, sum, etcd.MaxBoardValue)
	if err != nil {
		return err
	}
	if err := p.f.board.Put(ctx, shards); err != nil {
		p.hash = [32]byte{} // written in part: write all again
		return err
	}
	p.hash, p.putAt = h, time.Now()
	return nil
}

func (p *publisher) report(err error, omitted int) {
	log := p.f.opts.Logger
	switch {
	case err != nil && !p.bad && ctxAlive(err):
		log.Warn("fleet status: cannot publish this replica's proxies: other replicas do not list them until etcd is back", "err", err)
	case err == nil && p.bad:
		log.Info("fleet status: this replica's proxies are published again")
	}
	p.bad = err != nil
	if omitted > 0 && err == nil {
		log.Warn("fleet status: too many streams: some are not shown on the other replicas", "published", p.f.opts.MaxProxies, "omitted", omitted)
	}
}

func ctxAlive(err error) bool { return !errors.Is(err, context.Canceled) }

// unreadable marks the other replicas' proxies as last read: etcd cannot
// be reached, for err.
func (f *Fleet) unreadable(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unread == "" {
		// Marked on a copy: a caller may hold the previous list.
		stale := make([]Remote, len(f.remote))
		for i, r := range f.remote {
			r.Stale = true
			stale[i] = r
		}
		f.remote = stale
		staleRelays := make([]RemoteRelay, len(f.relays))
		for i, r := range f.relays {
			r.Stale = true
			staleRelays[i] = r
		}
		f.relays = staleRelays
	}
	f.unread = err.Error()
}

// refresh reads the other replicas' summaries. When etcd cannot be read,
// the last ones read are kept and the list says it is partial.
func (f *Fleet) refresh(ctx context.Context) {
	boards, err := f.reader.Boards(ctx)
	if err != nil {
		if ctxAlive(err) {
			f.unreadable(err)
		}
		return
	}
	readAt := time.Now()
	var remote []Remote
	var relays []RemoteRelay
	var peers []Peer
	var problems []string
	for replica, shards := range boards {
		if replica == f.opts.Replica {
			continue
		}
		sum, err := decodeAll(shards)
		proxies, omitted, self := sum.proxies, sum.omitted, sum.self
		peers = append(peers, Peer{Replica: replica, Self: self, Streams: len(proxies) + omitted, sameShard: sameGroups(self.Groups, f.opts.Self.Groups)})
		for _, r := range sum.relays {
			relays = append(relays, RemoteRelay{Replica: replica, Relay: r, ReadAt: readAt})
		}
		if sum.relaysOmitted > 0 {
			problems = append(problems, fmt.Sprintf("replica %s: %d relays' reports not published (too many)", replica, sum.relaysOmitted))
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("replica %s: %v", replica, err))
		}
		if omitted > 0 {
			problems = append(problems, fmt.Sprintf("replica %s: %d streams not published (too many)", replica, omitted))
		}
		for _, p := range proxies {
			remote = append(remote, Remote{Replica: replica, Groups: self.Groups, Proxy: p, ReadAt: readAt})
		}
	}
	sort.Slice(remote, func(i, j int) bool {
		if remote[i].Node != remote[j].Node {
			return remote[i].Node < remote[j].Node
		}
		return remote[i].Replica < remote[j].Replica
	})
	sort.Slice(relays, func(i, j int) bool {
		if relays[i].Replica != relays[j].Replica {
			return relays[i].Replica < relays[j].Replica
		}
		return relays[i].Relay.Relay < relays[j].Relay.Relay
	})
	sort.Strings(problems)
	sort.Slice(peers, func(i, j int) bool { return peers[i].Replica < peers[j].Replica })
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remote, f.relays, f.peers, f.partial, f.readAt, f.unread = remote, relays, peers, "", readAt, ""
	if len(problems) > 0 {
		f.partial = "fleet status partial: " + strings.Join(problems, "; ")
	}
}
