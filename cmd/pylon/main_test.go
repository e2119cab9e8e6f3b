package main

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// childEnv, set to "1", makes this test binary run main() with its
// arguments instead of the tests: the serve tests signal such a child as
// an operator signals pylon.
const childEnv = "PYLON_MAIN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// stopNow is the stop-now channel ctx carries.
func stopNow(t *testing.T, ctx context.Context) <-chan struct{} {
	t.Helper()
	now := daemon.StopNow(ctx)
	if now == nil {
		t.Fatal("the context carries no stop-now channel")
	}
	return now
}

// closedWithin reports whether c is closed within d.
func closedWithin[T any](c <-chan T, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// The first signal ends the context (a graceful stop), the second closes
// the stop-now channel and releases the signals (a third kills); done
// stops it all.
func TestSignals(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	var released atomic.Int32
	ctx, done := stopOnSignals(context.Background(), sigs, func() { released.Add(1) })
	now := stopNow(t, ctx)
	if ctx.Err() != nil || closedWithin(now, 0) {
		t.Fatal("stopped before any signal")
	}
	sigs <- syscall.SIGTERM
	if !closedWithin(ctx.Done(), 5*time.Second) {
		t.Fatal("the first signal did not end the context")
	}
	if closedWithin(now, 50*time.Millisecond) || released.Load() != 0 {
		t.Fatal("the first signal stopped at once or released the signals")
	}
	sigs <- os.Interrupt
	if !closedWithin(now, 5*time.Second) {
		t.Fatal("the second signal did not close the stop-now channel")
	}
	done()
	if released.Load() != 1 {
		t.Fatalf("signals released %d times, want once", released.Load())
	}
}

// With no signal, done ends the context and releases the signals once.
func TestSignalsDoneFirst(t *testing.T) {
	var released atomic.Int32
	ctx, done := stopOnSignals(context.Background(), make(chan os.Signal, 2), func() { released.Add(1) })
	done()
	if ctx.Err() == nil || released.Load() != 1 || closedWithin(stopNow(t, ctx), 0) {
		t.Fatalf("after done: ctx %v, released %d", ctx.Err(), released.Load())
	}
}

// Real SIGTERMs to this process, caught as main catches them.
func TestSignalsReal(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM)
	ctx, done := stopOnSignals(context.Background(), sigs, func() { signal.Stop(sigs) })
	defer done()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(ctx.Done(), 5*time.Second) {
		t.Fatal("SIGTERM did not end the context")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(stopNow(t, ctx), 5*time.Second) {
		t.Fatal("a second SIGTERM did not stop now")
	}
}
