package xds

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// Reasons a stream is refused or ended to balance the fleet (Balance).
const (
	// RefusedBalance: a new stream, while this replica holds more than
	// its share of its shard's streams; the client retries, at best
	// elsewhere.
	RefusedBalance = "balance"
	// RefusedShed: an open stream this replica ended to come down to its
	// share; the client reconnects, at best elsewhere.
	RefusedShed = "shed"
)

// shedMessage is what a shed stream's client is told.
const shedMessage = "replica over its share of the fleet: reconnect, to another replica if you can"

// DefaultShedRate is how many streams a second a replica sheds at most.
const DefaultShedRate = 10

// Balance spreads a shard's streams over its replicas (Options.Balance):
// over its target (guard.Load.Target) a replica refuses new streams with
// RESOURCE_EXHAUSTED, and Server.Balance sheds what it holds over it, at
// most ShedRate a second. A stream refused or shed has its connection
// closed once no other stream is on it, so that its client reconnects
// through its balancer, not over the same connection.
type Balance struct {
	// Load returns the shard's load, local (this replica's open streams)
	// counted now (fleetstatus.Fleet.Load).
	Load func(local int) guard.Load
	// ShedRate bounds the streams shed a second (0: DefaultShedRate).
	ShedRate float64
	// Report, if set, hears what balancing does (the metrics).
	Report BalanceReporter
}

// BalanceReporter hears what balancing does.
type BalanceReporter interface {
	// BalanceTarget is the replica's target, after each look at the
	// load; 0: none (a stale count, a lone replica).
	BalanceTarget(target int)
	// BalanceRefused counts a new stream refused for balance.
	BalanceRefused()
	// BalanceShed counts a stream shed, delta or state of the world.
	BalanceShed(delta bool)
}

// balanceAdmit refuses a new stream when this replica is over its target.
// A REST poll is not balanced: it lasts one request. Nor is a stream on a
// connection that has another: its client is served here already (an
// Envoy's per-type streams share a connection), and refusing one of its
// types would leave it half configured, not moved.
func (s *Server) balanceAdmit(st *stream) error {
	b := s.opts.Balance
	if b == nil || st.quiet || s.open.onConnCount(st.conn) > 1 {
		return nil
	}
	local := s.open.count() + 1 // this stream, not yet identified
	over, why := b.Load(local).Over(local)
	if !over {
		return nil
	}
	if b.Report != nil {
		b.Report.BalanceRefused()
	}
	s.closeWhenIdle(st.tconn, guard.ConnBalanced)
	return refuse(RefusedBalance, codes.ResourceExhausted, "%s", why)
}

// Balance sheds this replica's streams over its target until ctx ends:
// about once a second (with jitter, so that replicas do not act in step),
// at most ShedRate a second, delta streams first, chosen at random. With
// no Options.Balance it returns at once.
func (s *Server) Balance(ctx context.Context) error {
	b := s.opts.Balance
	if b == nil {
		return nil
	}
	rate := b.ShedRate
	if rate <= 0 {
		rate = DefaultShedRate
	}
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	budget, last := 0.0, time.Now()
	t := time.NewTimer(jitter(r))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		budget = min(budget+now.Sub(last).Seconds()*rate, max(rate, 1))
		last = now
		budget -= float64(s.shed(b, int(budget), r))
		t.Reset(jitter(r))
	}
}

// jitter is a period of a second, give or take a fifth.
func jitter(r *rand.Rand) time.Duration {
	return 800*time.Millisecond + time.Duration(r.Int64N(int64(400*time.Millisecond)))
}

// shed ends up to budget of this replica's streams over its target and
// returns how many it ended. It ends whole connections, each with all its
// streams, so that a client's per-type streams move together.
func (s *Server) shed(b *Balance, budget int, r *rand.Rand) int {
	if s.draining.Load() {
		return 0
	}
	load := b.Load(s.open.count())
	target, _ := load.Goal()
	if b.Report != nil {
		b.Report.BalanceTarget(target)
	}
	n := load.Excess(s.open.count(), budget)
	if n == 0 {
		return 0
	}
	conns := s.open.sheddable()
	delta := make([]bool, len(conns))
	for i, c := range conns {
		delta[i] = c.delta
	}
	ended, deltas := 0, 0
	for _, i := range guard.PickShed(delta, len(conns), r) {
		if ended >= n {
			break
		}
		c := conns[i]
		if ended > 0 && ended+len(c.streams) > n {
			// Past the budget: a connection of many streams (a relay's
			// keys) is shed only as the round's first, so that one round
			// ends at most one connection beyond its budget.
			continue
		}
		for _, st := range c.streams {
			st.end(&refusal{reason: RefusedShed, st: status.New(codes.Unavailable, shedMessage)})
			if b.Report != nil {
				b.Report.BalanceShed(st.delta)
			}
		}
		s.closeWhenIdle(c.tconn, guard.ConnBalanced)
		ended += len(c.streams)
		if c.delta {
			deltas += len(c.streams)
		}
	}
	s.log.Info("balance: shedding streams over this replica's share of the fleet; their clients reconnect, at best to another replica",
		"shed", ended, "delta", deltas, "target", target, "replicas", load.Replicas, "fleet_streams", load.Streams)
	return ended
}

// count is how many streams balancing counts: open, identified, and not
// REST polls, as the status tracker (and so the fleet's summary) counts
// them. Counting streams that never sent a request would let a client
// make a replica refuse and shed the fleet's proxies with silent streams.
func (o *openStreams) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counted
}

// identify marks s as a proxy's stream, counted by balancing, admitted
// with release (nil: none) to run when it ends.
func (o *openStreams) identify(s *openStream, release func(), subscribed Subscribed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, open := o.m[s]; open && !s.identified && !s.quiet {
		o.counted++
	}
	s.identified, s.release, s.subscribed = true, release, subscribed
}

// shedConn is a connection balancing may end: its streams (none of them
// a REST poll), delta when they all are.
type shedConn struct {
	tconn   *guard.Conn
	streams []*openStream
	delta   bool
}

// sheddable lists the connections balancing may end, with their streams.
func (o *openStreams) sheddable() []*shedConn {
	o.mu.Lock()
	defer o.mu.Unlock()
	byConn := map[guard.Key]*shedConn{}
	var out []*shedConn
	for s := range o.m {
		if s.quiet || !s.identified {
			continue
		}
		c := byConn[s.conn]
		if c == nil {
			c = &shedConn{tconn: s.tconn, delta: true}
			byConn[s.conn] = c
			out = append(out, c)
		}
		c.streams = append(c.streams, s)
		c.delta = c.delta && s.delta
	}
	return out
}

// onConnCount is how many streams are open on connection k.
func (o *openStreams) onConnCount(k guard.Key) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.perConn[k]
}
