// Package daemontest runs the whole daemon in process for tests: on
// loopback, until the test ends, with a bound on its start.
package daemontest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// StartBound bounds how long a daemon may take to serve its first config.
const StartBound = 10 * time.Second

// Daemon is a running daemon.
type Daemon struct {
	// XDS and Admin are the bound addresses.
	XDS, Admin string
	cancel     context.CancelFunc
	errc       chan error
	stopped    bool
}

// Start runs daemon.Run with o (its OnReady still called) and returns once
// the first config is served. The daemon stops when the test ends, which
// fails if Run returns an error; Stop stops it sooner.
func Start(t testing.TB, o daemon.Options) *Daemon {
	t.Helper()
	ready := make(chan [2]string, 1)
	onReady := o.OnReady
	o.OnReady = func(xds, admin string) {
		if onReady != nil {
			onReady(xds, admin)
		}
		ready <- [2]string{xds, admin}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Daemon{cancel: cancel, errc: make(chan error, 1)}
	go func() { d.errc <- daemon.Run(ctx, o) }()
	t.Cleanup(func() { d.Stop(t) })
	select {
	case a := <-ready:
		d.XDS, d.Admin = a[0], a[1]
	case err := <-d.errc:
		d.stopped = true
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(StartBound):
		t.Fatalf("daemon did not start within %v", StartBound)
	}
	return d
}

// Stop stops the daemon and waits for Run to return; its error fails t.
// Calling it again does nothing.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	if d.stopped {
		return
	}
	d.stopped = true
	d.cancel()
	if err := <-d.errc; err != nil {
		t.Errorf("daemon: %v", err)
	}
}

// LogBuffer is a log destination a test reads while the daemon writes.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
