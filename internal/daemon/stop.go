package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// stopNowKey carries the "stop now" channel in a context (WithStopNow).
type stopNowKey struct{}

// WithStopNow returns ctx carrying now. Run's graceful stop (when its ctx
// ends) is cut short once now is closed: the rest of the drain is skipped
// and the gRPC and admin servers are stopped without waiting for their
// clients. The command line closes now on a second SIGTERM or SIGINT. It
// travels in the context because the command layer hands Run only a
// context and the options it parsed from flags.
func WithStopNow(ctx context.Context, now <-chan struct{}) context.Context {
	return context.WithValue(ctx, stopNowKey{}, now)
}

// StopNow is the channel WithStopNow put in ctx, nil (never closed)
// without one.
func StopNow(ctx context.Context) <-chan struct{} {
	now, _ := ctx.Value(stopNowKey{}).(<-chan struct{})
	return now
}

// drainer is what the stop needs of the xDS server (*xds.Server).
type drainer interface {
	Drain(ctx context.Context, period time.Duration) error
	Draining() bool
	Shutdown()
}

// stopper runs Run's stop sequence: on the end of Run's context a graceful
// hand-over (not ready, no new connections, the open streams ended over
// the drain period), then the servers' shutdown. The admin API keeps
// serving until the very end, so operators watch /readyz and /proxies
// through the drain.
type stopper struct {
	period, grace time.Duration
	log           *slog.Logger
	gs            *grpc.Server
	xds           drainer
	http          *http.Server
	// lis is the xDS listener, closed first; closed records that this
	// was on purpose, so that Serve's accept error is a clean stop.
	lis    net.Listener
	closed atomic.Bool
	// draining is true from the first moment of the stop: /readyz then
	// answers 503.
	draining atomic.Bool
	// now, once closed, cuts the stop short (WithStopNow).
	now <-chan struct{}
	// streams counts the open xDS streams, for the log.
	streams func() int
	// announce, if set, is closed when the drain starts (the fleet
	// status publishes it at once); announced is how long the drain
	// then waits before ending streams, so that the other replicas read
	// it first (--fleet-status-period, at most half the drain period).
	announce  chan struct{}
	announced time.Duration
}

// Draining is the admin API's hook: true from the start of a stop.
func (s *stopper) Draining() bool { return s.draining.Load() || s.xds.Draining() }

// serveXDS serves gRPC on the xDS listener until the stop. Closing the
// listener makes Serve return its accept error while the open connections
// go on: that is the start of the drain, not a failure.
func (s *stopper) serveXDS(lis net.Listener) error {
	err := s.gs.Serve(lis)
	switch {
	case err == nil, errors.Is(err, grpc.ErrServerStopped):
		// A shutdown that comes before Serve starts makes it return
		// ErrServerStopped: a clean stop like any other.
		return nil
	case s.closed.Load() && errors.Is(err, net.ErrClosed):
		return nil
	}
	return fmt.Errorf("xds server: %w", err)
}

// run waits for the end of ctx (a signal: hand over, then stop) or of
// gctx (a component failed: stop at once), and drains in the first case.
// It returns when the servers may be shut down.
func (s *stopper) run(ctx, gctx context.Context) {
	select {
	case <-ctx.Done():
		s.drain(gctx)
	case <-gctx.Done():
		s.draining.Store(true)
	}
}

// drain is the hand-over: not ready at once, no new connections, then the
// open streams ended spread over the period, bounded by the period and a
// little, by gctx (a component failing) and by a stop-now.
func (s *stopper) drain(gctx context.Context) {
	s.draining.Store(true)
	s.closed.Store(true)
	if s.announce != nil {
		close(s.announce)
	}
	// Only the listener: the connections it accepted go on.
	_ = s.lis.Close()
	if s.period <= 0 {
		return
	}
	s.period -= s.waitAnnounced(gctx)
	ctx, cancel := context.WithTimeout(gctx, s.period+drainSlack(s.period))
	defer cancel()
	// A stop-now ends the drain's context; the watcher is stopped with it.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.now:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	s.log.Info("draining: not ready, no new xDS connections; ending the open streams spread over the drain period",
		"period", s.period.String(), "streams", s.streams())
	err := s.xds.Drain(ctx, s.period)
	// Drain returns early only with every stream ended; a done context
	// means it was cut short or reached its bound.
	bound := ctx.Err() != nil
	cancel()
	<-watched
	s.logDrained(gctx, time.Since(start), err, bound)
}

// logDrained says how the drain ended.
func (s *stopper) logDrained(gctx context.Context, took time.Duration, err error, bound bool) {
	t := took.Round(time.Millisecond).String()
	switch {
	case s.stopNow():
		s.log.Info("drain cut short: stopping now (second signal)", "took", t, "streams_left", s.streams())
	case gctx.Err() != nil:
		s.log.Info("drain cut short: a component failed", "took", t, "streams_left", s.streams())
	case bound || err != nil:
		s.log.Info("drain ended at its bound; the streams left end with the shutdown", "took", t, "streams_left", s.streams(), "err", err)
	default:
		s.log.Info("drain ended: every stream handed over", "took", t)
	}
}

// stopNow reports whether a stop-now came.
func (s *stopper) stopNow() bool {
	select {
	case <-s.now:
		return true
	default:
		return false
	}
}

// drainSlack is how long past the period the drain may take: the last
// connections end at the period's end, and their streams need a moment to
// wind down.
func drainSlack(period time.Duration) time.Duration {
	return max(time.Second, period/10)
}

// shutdown stops the xDS server gracefully within the grace, then the
// admin server; a stop-now makes both immediate.
func (s *stopper) shutdown() error {
	s.log.Info("shutting down")
	stopped := make(chan struct{})
	go func() {
		// GOAWAY to clients and no new streams; returns once the
		// streams below have ended.
		s.gs.GracefulStop()
		close(stopped)
	}()
	s.xds.Shutdown()
	timer := time.NewTimer(s.grace)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.gs.Stop()
		<-stopped
	case <-s.now:
		s.gs.Stop()
		<-stopped
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	if s.stopNow() {
		return s.http.Close()
	}
	return s.http.Shutdown(shutCtx)
}

// waitAnnounced waits, before the first stream ends, for the other
// replicas to read that this one drains (announced, at most half the
// drain period), bounded by gctx and a stop-now; it returns how long it
// waited. A proxy handed over before they read it would be counted twice
// (here, and where it arrives) and might be refused for balance.
func (s *stopper) waitAnnounced(gctx context.Context) time.Duration {
	wait := min(s.announced, s.period/2)
	if wait <= 0 {
		return 0
	}
	start := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-gctx.Done():
	case <-s.now:
	}
	return time.Since(start)
}
