package file

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A burst of files renamed into place (a writer replacing its config many
// times a second) is read at most once per quiet period after the first,
// which is read at once: each read is a whole compile and a response to
// every proxy, so reading each rename gave proxies more, emptier
// responses. The last one is read.
func TestRenamesInABurstReadOncePerQuietPeriod(t *testing.T) {
	const quiet = 200 * time.Millisecond
	renamesPaced(t, Options{Quiet: quiet, MaxWait: time.Hour}, quiet)
}

// With Spacing longer than Quiet (the daemon's grows with the proxies a
// publish reaches), a burst is read at most once per Spacing.
func TestRenamesInABurstReadOncePerSpacing(t *testing.T) {
	const spacing = 250 * time.Millisecond
	renamesPaced(t, Options{Quiet: 20 * time.Millisecond, MaxWait: time.Hour, Spacing: func() time.Duration { return spacing }}, spacing)
}

// renamesPaced renames a file into place 60 times, 5 ms apart, under a
// source of o, and checks the last is read and at most one read per gap
// after the first.
func renamesPaced(t *testing.T, o Options, quiet time.Duration) {
	const renames = 60
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "v0")
	o.Path = path
	updates := runOpts(t, o)
	next(t, updates, has("pylon.yaml=v0;"))
	reads := make(chan string, renames+10)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-updates:
				reads <- contents(u)
			case <-stop:
				return
			}
		}
	}()
	start := time.Now()
	for i := 1; i <= renames; i++ {
		tmp := filepath.Join(dir, ".pylon.yaml.tmp")
		write(t, tmp, fmt.Sprintf("v%d", i))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the writer's pace, not a wait for the source
	}
	burst := time.Since(start)
	want := fmt.Sprintf("pylon.yaml=v%d;", renames)
	n := 0
	deadline := time.After(wait)
	for last := ""; last != want; n++ {
		select {
		case last = <-reads:
		case <-deadline:
			t.Fatalf("the last rename (%s) was not read within %v; last read %q", want, wait, last)
		}
	}
	close(stop)
	<-done
	// One read at once, then one per quiet period the burst lasted, and
	// one for its tail.
	if limit := 2 + int(burst/quiet); n > limit {
		t.Fatalf("%d renames over %v were read %d times, want at most %d (one per %v)", renames, burst.Round(time.Millisecond), n, limit, quiet)
	}
}
