// Package daemontest runs the whole daemon in process for tests: on
// loopback, until the test ends, with a bound on its start; and a log
// buffer the test reads while the daemon writes.
package daemontest

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// StartBound bounds how long a daemon may take to serve its first config.
const StartBound = 20 * time.Second

// Quiet and MaxWait are the file debounce the suites run with: a test of
// a config change waits milliseconds, not the daemon's default second.
const (
	Quiet   = 20 * time.Millisecond
	MaxWait = 200 * time.Millisecond
)

// Daemon is a running daemon.
type Daemon struct {
	// XDS and Admin are the bound addresses; DataDir the data folder,
	// where the daemon wrote its tokens.
	XDS, Admin, DataDir string
	cancel              context.CancelFunc
	errc                chan error
	stopped             bool
}

// FileMode is the options of a daemon serving the config at path with the
// suites' short debounce; Start gives it loopback ports and a data folder.
func FileMode(path string) daemon.Options {
	return daemon.Options{ConfigPath: path, DebounceQuiet: Quiet, DebounceMax: MaxWait}
}

// loopback fills what o leaves empty with what a test may use: ports
// on 127.0.0.1 chosen by the kernel and a fresh data folder.
func loopback(t testing.TB, o daemon.Options) daemon.Options {
	if o.XDSAddr == "" {
		o.XDSAddr = "127.0.0.1:0"
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:0"
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	return o
}

// Start runs daemon.Run with o (its OnReady still called) and returns once
// the first config is served. Empty addresses are loopback ports, an empty
// DataDir a fresh folder. The daemon stops when the test ends, which fails
// if Run returns an error; Stop stops it sooner.
func Start(t testing.TB, o daemon.Options) *Daemon {
	t.Helper()
	o = loopback(t, o)
	ready := make(chan [2]string, 1)
	onReady := o.OnReady
	o.OnReady = func(xds, admin string) {
		if onReady != nil {
			onReady(xds, admin)
		}
		ready <- [2]string{xds, admin}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Daemon{DataDir: o.DataDir, cancel: cancel, errc: make(chan error, 1)}
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

// Refusal runs the daemon with o, as Start does, expecting it to refuse to
// start, and returns its error; a daemon that starts fails the test.
func Refusal(t testing.TB, o daemon.Options) error {
	t.Helper()
	o = loopback(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.OnReady = func(string, string) { cancel() }
	errc := make(chan error, 1)
	go func() { errc <- daemon.Run(ctx, o) }()
	select {
	case err := <-errc:
		if ctx.Err() != nil {
			t.Fatal("the daemon started, want a refusal")
		}
		return err
	case <-time.After(StartBound):
		t.Fatalf("the daemon neither started nor stopped within %v", StartBound)
	}
	return nil
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

// Token is the token the daemon keeps in its data folder under name
// ("admin-token", "read-token").
func (d *Daemon) Token(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.DataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// LogBuffer is a log destination a test reads while the daemon (or a
// process) writes. Keep, if set, keeps only the last Keep bytes.
type LogBuffer struct {
	Keep    int
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed and replaced on every write
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if over := l.b.Len() - l.Keep; l.Keep > 0 && over > 0 {
		l.b.Next(over)
	}
	if l.written != nil {
		close(l.written)
		l.written = nil
	}
	return len(p), nil
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger is a text logger at info level writing to l, for Options.Logger.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, nil))
}

// WaitFor waits up to within for the log to contain s, and fails the test
// with the log if it does not.
func (l *LogBuffer) WaitFor(t testing.TB, s string, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		found := strings.Contains(l.b.String(), s)
		if l.written == nil {
			l.written = make(chan struct{})
		}
		written := l.written
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-written:
		case <-deadline.C:
			t.Fatalf("no %q logged within %v:\n%s", s, within, l.String())
		}
	}
}
