package xds

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A stream keeps one goroutine for as long as it lives: gRPC's handler
// goroutine, which reads the stream's requests and answers each in turn.
// Everything else a stream reacts to (a publish, another per-type stream of
// its node moving on, the bound of a hold, its first message, a heartbeat)
// wakes it through wakeups: the event queues the stream's drain for the
// server's drainers (drainers.go), a few goroutines that handle what is
// pending, stream after stream. Requests and wakeups are handled under the
// stream's mutex, one at a time, as one loop would, so sends stay
// serialized and the stream's state has one owner at a time.
//
// A second goroutine per stream (one blocked in Recv, one in a select over
// the stream's channels) costs a stack of its own, about 4 KB for each
// proxy. What this costs instead: a queue of wakeups, and a way to end the
// stream while its one goroutine waits in RecvMsg (cutter).

// What wakes a stream, besides its requests.
const (
	wakeFleet uint8 = 1 << iota // a publish
	wakeKick                    // another per-type stream of the node published
	wakeHold                    // a bounded hold reached its bound (wakeAt)
	wakeGreet                   // the stream's first message is due (greet.go)
	wakeBeat                    // a TTL heartbeat is due
	wakeFirst                   // the bound on the first request passed (firstrequest.go)
)

// wakeups runs what wakes a stream and settles how the stream ends, as one
// loop would: what is being handled (a request or a wakeup) finishes first,
// and its error, if any, is the outcome; otherwise the first cause from
// outside (the stream's context) or the end of the client's requests.
type wakeups struct {
	mu      sync.Mutex
	pending uint8
	// running is set while a goroutine handles pending wakeups.
	running bool
	// busy is set while the reader handles a request; done once the
	// reader will not call RecvMsg again.
	busy, done bool
	// hasCause: see cause.
	hasCause bool
	// armed is set once the stream runs (arm): a cause from outside
	// before then is only recorded, and acted on by arm.
	armed bool
	// stopped is set with the stream's outcome, err (nil: it ended well).
	stopped bool
	// onPool is set, under the stream's mutex, while a wakeup is handled
	// on pool: its sends may block (stream.send). The flags share a word:
	// a stream's wakeups stay in the 96-byte size class.
	onPool bool
	// cause is why the stream is to end, from outside, once what is being
	// handled is (hasCause).
	cause error
	err   error
	wg    sync.WaitGroup
	// handle handles pending wakeups under the stream's mutex; cut ends
	// the stream while its reader waits in RecvMsg, making RecvMsg return.
	handle func(bits uint8) error
	cut    func()
	// pool runs drain (drainers).
	pool *drainers
}

// settle decides the outcome, with mu held, once nothing is being handled
// or what was returned err.
func (w *wakeups) settle(err error) {
	switch {
	case w.stopped:
	case err != nil:
		w.stopped, w.err = true, err
	case w.hasCause:
		w.stopped, w.err = true, w.cause
	}
}

// post records bits and starts a goroutine to handle them unless one is
// running. It never blocks: publishers and other streams call it.
func (w *wakeups) post(bits uint8) {
	w.mu.Lock()
	if w.stopped || w.hasCause || w.done {
		w.mu.Unlock()
		return
	}
	w.pending |= bits
	if w.running {
		w.mu.Unlock()
		return
	}
	w.running = true
	w.wg.Add(1)
	w.mu.Unlock()
	w.pool.submit(w)
}

// drain handles what is pending, one round a turn on the drainers: when
// more was posted meanwhile, the stream goes back to the end of the queue
// rather than keep its drainer (a goroutine per wakeup had the
// scheduler's fairness). Once nothing is pending it ends; when the stream
// ended meanwhile and its reader waits in RecvMsg, it cuts it off.
func (w *wakeups) drain() {
	w.mu.Lock()
	if w.hasCause {
		w.settle(nil)
	}
	bits := w.pending
	w.pending = 0
	if !w.stopped && !w.done && bits != 0 {
		w.mu.Unlock()
		err := w.handle(bits)
		w.mu.Lock()
		if err != nil || w.hasCause {
			w.settle(err)
		}
		if w.pending != 0 && !w.stopped && !w.done {
			// Still running (post queues nothing more), the wait group
			// still counting this drain.
			w.mu.Unlock()
			w.pool.submit(w)
			return
		}
	}
	w.pending = 0
	w.running = false
	cut := w.stopped && !w.busy && !w.done
	w.mu.Unlock()
	if cut {
		// The cut takes the stream's mutex and writes its status.
		w.pool.mayBlock()
		w.cut()
		w.pool.unblocked()
	}
	w.wg.Done()
}

// stop ends the stream for cause, from outside, unless it is ending
// already: at once when nothing is being handled, or else once that is
// (a send under way finishes first, as it would in one loop).
func (w *wakeups) stop(cause error) {
	w.mu.Lock()
	if w.stopped || w.hasCause {
		w.mu.Unlock()
		return
	}
	w.hasCause, w.cause = true, cause
	w.unlockCutting(w.armed && !w.running && !w.busy && !w.done)
}

// arm marks the stream running: a cause recorded before (stop) ends it
// now.
func (w *wakeups) arm() {
	w.mu.Lock()
	w.armed = true
	w.unlockCutting(w.hasCause && !w.stopped && !w.running && !w.busy && !w.done)
}

// unlockCutting releases mu (held) and, when idle (a cause to end the
// stream and nothing being handled: its reader waits in RecvMsg), settles
// the outcome and cuts the stream off; finish waits for the cut too.
func (w *wakeups) unlockCutting(idle bool) {
	if idle {
		w.settle(nil)
		w.wg.Add(1)
	}
	w.mu.Unlock()
	if idle {
		defer w.wg.Done()
		w.cut()
	}
}

// outcome is how the stream ended, once it did.
func (w *wakeups) outcome() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// begin reports whether the reader may handle the request it read.
func (w *wakeups) begin() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.hasCause {
		// finish settles, after the wakeup being handled if any.
		w.done = true
		return false
	}
	w.busy = true
	return true
}

// end records the outcome of a request and reports whether the reader
// reads on.
func (w *wakeups) end(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	w.settle(err)
	if w.stopped {
		w.done = true
	}
	return !w.stopped
}

// finish is the reader's last word, err the end of its requests (nil: the
// client closed its side): it waits for the wakeup being handled, then
// returns the stream's outcome.
func (w *wakeups) finish(err error) error {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settle(nil)
	if !w.stopped {
		w.stopped, w.err = true, err
	}
	return w.err
}

// newWakeups makes a stream's wakeups, ready to be stopped (w.stop) from
// the moment it exists: a drain or a shutdown may come before the stream
// runs. cutC is set for a stream other than gRPC's (see run).
func newWakeups(st *stream) (w *wakeups, cutC chan struct{}) {
	w = &wakeups{pool: st.srv.drainers}
	if ts := cutter(st.gs); ts != nil {
		// The stream ends here, then its status goes out: that ends the
		// RecvMsg its goroutine waits in (the status it would write then
		// is not sent: the stream has one already).
		w.cut = func() {
			err := w.outcome()
			st.mu.Lock()
			st.close(err)
			st.mu.Unlock()
			_ = ts.WriteStatus(statusOf(err))
		}
		return w, nil
	}
	// A transport whose RecvMsg this stream cannot end (ServeStream): the
	// reading moves to a goroutine of its own, and run waits for either.
	cutC = make(chan struct{})
	w.cut = sync.OnceFunc(func() { close(cutC) })
	return w, cutC
}

// run is the stream's loop: the calling goroutine reads requests and
// answers each (request); wakeups handle the rest. It returns once the
// stream ends, when nothing of the stream runs any more. What ends it from
// outside calls w.stop (serveStream); the client going away ends its
// RecvMsg.
func run[Req any, P interface {
	*Req
	proto.Message
}](w *wakeups, cutC chan struct{}, st *stream, onRequest func(P) error, onFleet, onHeartbeat func() error) error {
	w.handle = func(bits uint8) error {
		if !st.mu.TryLock() {
			// The reader holds it, maybe in a send to a client that
			// does not read.
			w.pool.mayBlock()
			st.mu.Lock()
			w.pool.unblocked()
		}
		defer st.mu.Unlock()
		w.onPool = true
		defer func() { w.onPool = false }()
		return st.woken(bits, onFleet, onHeartbeat)
	}
	st.ev = w
	st.mu.Lock()
	st.awaitFirst(w)
	st.mu.Unlock()
	st.hb.fire = func() { w.post(wakeBeat) }
	defer st.hb.stop()
	st.srv.fanout.add(st.conn, w)
	defer st.srv.fanout.remove(st.conn, w)
	if cutC != nil {
		// Such a transport's RecvMsg may not end with its context.
		ctx := st.gs.Context()
		unwatch := context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
		defer unwatch()
	}
	w.arm()

	read := func() error {
		// One request message for the stream's life, reset for each read:
		// nothing keeps it past its handling (what is kept of a request,
		// its node, names and versions, are objects of their own), and a
		// message per ACK shows in BenchmarkFanOutNamedEndpoints's
		// allocations.
		req := P(new(Req))
		for {
			proto.Reset(req)
			if err := st.gs.RecvMsg(req); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return w.finish(err)
			}
			if !w.begin() {
				return w.finish(nil)
			}
			st.mu.Lock()
			err := request(st, req, onRequest, onFleet)
			if err == nil {
				st.hb.arm(st.heartbeatInterval())
			}
			st.mu.Unlock()
			if !w.end(err) {
				return w.finish(nil)
			}
		}
	}
	if cutC == nil {
		return read()
	}
	res := make(chan error, 1)
	go func() { res <- read() }()
	select {
	case err := <-res:
		return err
	case <-cutC:
		return w.finish(nil)
	}
}

// ended is how a stream ends when cause ends it from outside (a drain's
// errDrained): as the server shutting down, if it is.
func (s *Server) ended(cause error) error {
	if s.life.Err() != nil {
		return status.Error(codes.Unavailable, "pylon is shutting down")
	}
	return cause
}

// woken handles what woke the stream, under its mutex.
func (st *stream) woken(bits uint8, onFleet, onHeartbeat func() error) error {
	if bits&wakeFirst != 0 && st.node == nil {
		return st.noRequest()
	}
	if bits&wakeFleet != 0 && st.node != nil {
		st.useFleet(st.srv.opts.Fleets.Current())
		if err := st.checkShard(); err != nil {
			return err
		}
		if err := onFleet(); err != nil {
			return err
		}
		st.hb.arm(st.heartbeatInterval())
	}
	if bits&wakeKick != 0 && st.holding {
		// Another per-type stream of this node moved on: what was held
		// back here for it may go now.
		if err := onFleet(); err != nil {
			return err
		}
	}
	if bits&wakeHold != 0 && !st.wakeDue.IsZero() && !time.Now().Before(st.wakeDue) {
		// A hold for a slow client reached its bound.
		st.wakeDue = time.Time{}
		if err := onFleet(); err != nil {
			return err
		}
	}
	if bits&wakeGreet != 0 && st.greetDue {
		st.greetDue = false
		if err := st.onGreet(); err != nil {
			return err
		}
	}
	if bits&wakeBeat != 0 && st.hb.due(time.Now()) {
		if err := onHeartbeat(); err != nil {
			return err
		}
	}
	return nil
}

// heartbeats is a stream's TTL refresh timer, running only while the
// stream's snapshot has resources with a TTL.
type heartbeats struct {
	t     *time.Timer
	every time.Duration
	next  time.Time
	fire  func()
}

func (h *heartbeats) arm(every time.Duration) {
	switch {
	case every == h.every:
	case every <= 0:
		h.stop()
	default:
		h.next = time.Now().Add(every)
		if h.t == nil {
			h.t = time.AfterFunc(every, h.fire)
		} else {
			h.t.Reset(every)
		}
	}
	h.every = max(every, 0)
}

// due reports whether a heartbeat is due at now and, if so, schedules the
// next one: a timer that fired before a change of interval is ignored.
func (h *heartbeats) due(now time.Time) bool {
	if h.every <= 0 || now.Before(h.next) {
		return false
	}
	h.next = h.next.Add(h.every)
	if !h.next.After(now) {
		h.next = now.Add(h.every)
	}
	h.t.Reset(h.next.Sub(now))
	return true
}

func (h *heartbeats) stop() {
	if h.t != nil {
		h.t.Stop()
	}
	h.t, h.every = nil, 0
}

// statusWriter is gRPC's server transport stream, which writes a stream's
// final status: gRPC's own handler does so after the handler returns.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// cutter returns what writes gs's status, nil for a stream other than
// gRPC's (ServeStream). Writing the status ends the stream, and with it
// a RecvMsg under way: the only way to end one from the handler's side.
func cutter(gs grpc.ServerStream) statusWriter {
	if ts, ok := grpc.ServerTransportStreamFromContext(gs.Context()).(statusWriter); ok {
		return ts
	}
	return nil
}

// statusOf is the status gRPC writes when a handler returns err.
func statusOf(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	return status.FromContextError(err)
}
