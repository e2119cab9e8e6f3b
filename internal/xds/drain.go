package xds

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// RefusedDraining: the replica is draining (Server.Drain) and takes no new
// streams; the client should connect to another replica.
const RefusedDraining = "draining"

// drainMessage is what a client is told when Drain ends its stream or
// refuses a new one.
const drainMessage = "replica draining: reconnect to another"

// errDrained ends a stream that Drain ended: UNAVAILABLE, so that the
// client reconnects (to another replica, its connection being closed).
var errDrained = status.Error(codes.Unavailable, drainMessage)

// drainFlush is how long a drained connection stays open after its
// streams have ended, so that gRPC writes their UNAVAILABLE status before
// the connection closes (a client that misses it sees the connection
// close, also UNAVAILABLE, without the reason).
const drainFlush = 200 * time.Millisecond

// openStreams are the server's open streams, for Drain: registered when a
// stream starts, under the same lock as the draining flag, so that a
// stream either is refused or is one Drain ends.
type openStreams struct {
	mu       sync.Mutex
	m        map[*openStream]struct{}
	perConn  map[guard.Key]int // open streams per connection
	counted  int               // identified streams, REST polls aside (balance.go)
	seq      uint64
	draining bool
	// finished are the drain's groups whose streams have all ended, not
	// yet taken by the drain; wake is woken when one is added.
	finished []*drainGroup
	wake     chan struct{}
}

// openStream is one stream as Drain sees it.
type openStream struct {
	seq   uint64 // registration order: older streams first
	conn  guard.Key
	tconn *guard.Conn // nil when the connection is not tracked
	end   context.CancelCauseFunc
	group *drainGroup // set when a drain starts
	// delta and quiet are the stream's (balance.go picks delta streams
	// first to shed, and never a REST poll); identified is set once its
	// node is accepted (balance.go counts only those: a stream that never
	// sends a request has passed no admission and is no proxy's).
	delta, quiet, identified bool
	// release ends the stream's admission by Options.Admit, if any;
	// subscribed is what Admit returned with it (asked.go). Both are set
	// before the stream's first request is handled, and read by it alone.
	release    func()
	subscribed Subscribed
}

// add registers a stream, or reports false when the server is draining.
func (o *openStreams) add(conn guard.Key, tconn *guard.Conn, end context.CancelCauseFunc, delta, quiet bool) (*openStream, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.draining {
		return nil, false
	}
	if o.m == nil {
		o.m = map[*openStream]struct{}{}
		o.perConn = map[guard.Key]int{}
	}
	o.seq++
	s := &openStream{seq: o.seq, conn: conn, tconn: tconn, end: end, delta: delta, quiet: quiet}
	o.m[s] = struct{}{}
	o.perConn[conn]++
	return s, true
}

// endAll ends every stream registered (the server's shutdown): from here
// rather than by a hook on the server's context in every stream, which
// costs each a few hundred bytes and the context's lock at every open
// and close.
func (o *openStreams) endAll(cause error) {
	o.mu.Lock()
	ends := make([]context.CancelCauseFunc, 0, len(o.m))
	for s := range o.m {
		ends = append(ends, s.end)
	}
	o.mu.Unlock()
	for _, end := range ends {
		end(cause)
	}
}

// onConn reports whether connection k has open streams.
func (o *openStreams) onConn(k guard.Key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.perConn[k] > 0
}

// remove unregisters a stream whose handler is done; the last of a
// drained connection's streams tells the drain.
func (o *openStreams) remove(s *openStream) (release func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	release = s.release
	delete(o.m, s)
	if s.identified && !s.quiet {
		o.counted--
	}
	if o.perConn[s.conn]--; o.perConn[s.conn] <= 0 {
		delete(o.perConn, s.conn)
	}
	g := s.group
	if g == nil {
		return
	}
	if g.left--; g.left == 0 {
		o.finished = append(o.finished, g)
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	return release
}

// takeFinished returns the groups whose streams all ended since the last
// call.
func (o *openStreams) takeFinished() []*drainGroup {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.finished
	o.finished = nil
	return out
}

// drainGroup is one connection's streams, ended together.
type drainGroup struct {
	conn    guard.Key
	tconn   *guard.Conn
	oldest  uint64
	streams []*openStream
	left    int // streams not ended yet; guarded by openStreams.mu
	// ended is set at the group's turn, finished once its streams are all
	// done (at once for a connection without streams); both the drain's.
	ended, finished bool
}

// startDrain marks the server draining and returns its open streams by
// connection, the connection of the oldest stream first, with the
// tracked connections that have no stream last (by address, to be
// deterministic): they are closed in their turn, so that their clients
// too reconnect elsewhere.
func (o *openStreams) startDrain(tracked []*guard.Conn) ([]*drainGroup, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draining = true
	o.wake = make(chan struct{}, 1)
	byConn := map[guard.Key]*drainGroup{}
	var groups []*drainGroup
	for s := range o.m {
		g := byConn[s.conn]
		if g == nil {
			g = &drainGroup{conn: s.conn, tconn: s.tconn, oldest: s.seq}
			byConn[s.conn] = g
			groups = append(groups, g)
		}
		g.oldest = min(g.oldest, s.seq)
		g.streams = append(g.streams, s)
		g.left++
		s.group = g
	}
	slices.SortFunc(groups, func(a, b *drainGroup) int { return compareUint(a.oldest, b.oldest) })
	slices.SortFunc(tracked, func(a, b *guard.Conn) int { return compareKey(a.Key(), b.Key()) })
	for _, tc := range tracked {
		if byConn[tc.Key()] == nil {
			groups = append(groups, &drainGroup{conn: tc.Key(), tconn: tc, finished: true})
		}
	}
	return groups, len(o.m)
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareKey(a, b guard.Key) int {
	switch {
	case a.Remote != b.Remote:
		if a.Remote < b.Remote {
			return -1
		}
		return 1
	case a.Local < b.Local:
		return -1
	case a.Local > b.Local:
		return 1
	}
	return 0
}

// drainer is one Drain's schedule: group i's streams end at start plus
// i/len(groups) of the period, and its connection closes drainFlush after
// they have ended. Each step costs O(1) per stream or connection.
type drainer struct {
	srv    *Server
	groups []*drainGroup
	period time.Duration
	// at returns a channel that fires at offset from the drain's start
	// (the server's drainClock; time itself unless a test injects one).
	at func(offset time.Duration) <-chan time.Time
	// next is the next group to end; unfinished counts the groups whose
	// streams have not all ended; flushing are the connections to close,
	// in order of their closing time.
	next       int
	unfinished int
	flushing   []flushing
}

type flushing struct {
	tconn *guard.Conn
	at    time.Time
}

// offset is when group i ends, from the drain's start: evenly spread, the
// first at once, the last one group's share before the period ends.
func (d *drainer) offset(i int) time.Duration {
	if d.period <= 0 {
		return 0
	}
	return time.Duration(int64(d.period) * int64(i) / int64(len(d.groups)))
}

// run ends the groups on schedule until all are ended and their
// connections closed, or ctx is done.
func (d *drainer) run(ctx context.Context) error {
	for _, g := range d.groups {
		if !g.finished {
			d.unfinished++
		}
	}
	var due <-chan time.Time
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	wake := d.srv.open.wake
	for {
		now := time.Now()
		d.collect(now)
		if d.unfinished == 0 {
			// Every stream ended (Shutdown, or the clients left): the
			// remaining turns have nothing to spread.
			for d.next < len(d.groups) {
				d.end(d.groups[d.next], now)
				d.next++
			}
			due = nil
		}
		d.closeDue(now)
		if d.next == len(d.groups) && d.unfinished == 0 && len(d.flushing) == 0 {
			return nil
		}
		if due == nil && d.next < len(d.groups) {
			due = d.at(d.offset(d.next))
		}
		if len(d.flushing) > 0 {
			flush.Reset(max(d.flushing[0].at.Sub(now), 0))
		}
		select {
		case <-due:
			due = nil
			d.end(d.groups[d.next], time.Now())
			d.next++
		case <-wake:
		case <-flush.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// end ends a group's streams with UNAVAILABLE at its turn; its connection
// is closed once they are done.
func (d *drainer) end(g *drainGroup, now time.Time) {
	g.ended = true
	for _, s := range g.streams {
		s.end(errDrained)
	}
	if g.finished && g.tconn != nil {
		// Nothing of it was left to end (a connection without streams, or
		// whose clients left): it closes like the others.
		d.flushing = append(d.flushing, flushing{tconn: g.tconn, at: now.Add(drainFlush)})
	}
}

// collect takes the groups whose streams have all ended: an ended one's
// connection closes after drainFlush, for their status to go out.
func (d *drainer) collect(now time.Time) {
	for _, g := range d.srv.open.takeFinished() {
		g.finished = true
		d.unfinished--
		if g.ended && g.tconn != nil {
			d.flushing = append(d.flushing, flushing{tconn: g.tconn, at: now.Add(drainFlush)})
		}
	}
}

// closeDue closes the connections whose time came. Closing times only
// grow (now plus a constant, with now from the monotonic clock), so the
// first not due ends it.
func (d *drainer) closeDue(now time.Time) {
	n := 0
	for _, f := range d.flushing {
		if now.Before(f.at) {
			break
		}
		f.tconn.CloseAs(guard.ConnDrained)
		n++
	}
	clear(d.flushing[:n])
	d.flushing = d.flushing[n:]
}

// Drain hands the server's proxies over to other replicas, so that they
// see a trickle of reconnects, not a storm. From the call on, new streams
// are refused with UNAVAILABLE ("replica draining: reconnect to another",
// refusal reason "draining"). The open streams end with UNAVAILABLE
// spread evenly over period, connection by connection, the connection of
// the oldest stream first: a connection's streams end together, at
// i/n of the period for the i-th of n connections, and a connection
// served on Listener is closed once they have (after a moment for their
// status to go out), so that its client's reconnect goes to another
// replica rather than back over the same HTTP/2 connection. Listener's
// connections without a stream are closed once every stream has ended;
// streams on an untracked connection just end. A period <= 0 ends them
// all at once.
//
// Drain returns nil once every stream open at the call has ended and
// their connections are closed, or ctx's error when ctx is done first
// (the rest are then left to Shutdown). Its work is one goroutine, the
// caller's. Draining reports the call. A server drains once: a second
// call returns an error at once.
func (s *Server) Drain(ctx context.Context, period time.Duration) error {
	if s.draining.Swap(true) {
		return errors.New("xds: the server is already draining")
	}
	start := time.Now()
	groups, n := s.open.startDrain(s.conns.All())
	s.log.Info("draining: ending xDS streams connection by connection, spread over the period", "streams", n, "connections", len(groups), "period", period.String())
	clock := s.drainClock
	if clock == nil {
		clock = func(offset time.Duration) <-chan time.Time { return time.After(time.Until(start.Add(offset))) }
	}
	d := &drainer{srv: s, groups: groups, period: period, at: clock}
	if err := d.run(ctx); err != nil {
		s.log.Warn("drain stopped before every stream ended: shutdown ends the rest", "turns_left", len(groups)-d.next, "error", err.Error())
		return err
	}
	s.log.Info("drained: every xDS stream ended", "streams", n, "connections", len(groups), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// refuseDraining refuses a new stream while the server drains, and closes
// its connection when the server tracks it and no stream open before the
// drain is on it (those keep their turn), after a moment for the status to
// go out: the client then reconnects, to another replica, rather than
// retrying over the same connection.
func (s *Server) refuseDraining(st *stream) error {
	r := &refusal{reason: RefusedDraining, st: status.New(codes.Unavailable, drainMessage)}
	st.refused(r)
	s.closeWhenIdle(st.tconn, guard.ConnDrained)
	return r
}

// closeWhenIdle closes tc (when the server tracks it: not nil), a moment
// after a stream on it was refused or ended, for the status to go out,
// unless another stream is open on it.
func (s *Server) closeWhenIdle(tc *guard.Conn, reason string) {
	if tc == nil {
		return
	}
	time.AfterFunc(drainFlush, func() {
		if !s.open.onConn(tc.Key()) {
			tc.CloseAs(reason)
		}
	})
}
