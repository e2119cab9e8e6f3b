package file

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// runFiles starts a Files watcher counting its relevant events; it stops
// with the test.
func runFiles(t *testing.T, o FilesOptions) (*Files, *atomic.Int64) {
	t.Helper()
	var events atomic.Int64
	o.Quiet, o.MaxWait = 20*time.Millisecond, 200*time.Millisecond
	o.OnEvent = func() { events.Add(1) }
	f := NewFiles(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f, &events
}

func changed(t *testing.T, f *Files) time.Time {
	t.Helper()
	select {
	case at := <-f.Changed():
		return at
	case <-time.After(wait):
		t.Fatal("no change reported")
	}
	return time.Time{}
}

// A watched certificate's rewrite is reported; other files in its folder
// (a log written line by line) are not events at all.
func TestFilesReportsOnlyWatchedFiles(t *testing.T) {
	certs := t.TempDir()
	cert := filepath.Join(certs, "tls.crt")
	write(t, cert, "c1")
	f, events := runFiles(t, FilesOptions{})
	f.Watch([]string{cert})
	// Starting a watch reports once: the file may have changed between
	// its read and the watch.
	changed(t, f)
	noise(t, certs, 200)
	before := time.Now()
	write(t, cert, "c2")
	if at := changed(t, f); at.Before(before) {
		t.Fatalf("a change reported at %v, before the certificate was written (%v): the noise was an event", at, before)
	}
	// One rewrite is one or two events (write, chmod); the noise was 600
	// writes.
	if n := events.Load(); n == 0 || n > 4 {
		t.Fatalf("%d events, want the certificate's only", n)
	}
}

// A resync reports a change without events, once files are watched, so a
// lost event delays a rotation by at most the resync period.
func TestFilesResync(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "tls.crt")
	write(t, cert, "c1")
	f, events := runFiles(t, FilesOptions{Resync: 50 * time.Millisecond})
	f.Watch([]string{cert})
	changed(t, f) // the watch's start
	changed(t, f) // a resync
	if n := events.Load(); n != 0 {
		t.Fatalf("%d events, want none", n)
	}
}
