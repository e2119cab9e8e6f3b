package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// run starts a source on path and returns its updates; it stops with the test.
func run(t *testing.T, path string) <-chan source.Update {
	t.Helper()
	return runWith(t, path, 20*time.Millisecond, 200*time.Millisecond)
}

// next returns the next update whose files satisfy ok, within a bound.
func next(t *testing.T, updates <-chan source.Update, ok func(source.Update) bool) source.Update {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case u := <-updates:
			if ok(u) {
				return u
			}
		case <-deadline:
			t.Fatal("no matching update")
		}
	}
}

func contents(u source.Update) string {
	var b strings.Builder
	for _, f := range u.Files {
		b.WriteString(filepath.Base(f.Path) + "=" + string(f.Data) + ";")
	}
	return b.String()
}

func has(s string) func(source.Update) bool {
	return func(u source.Update) bool { return u.Err == nil && contents(u) == s }
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "v1")
	updates := run(t, path)
	next(t, updates, has("pylon.yaml=v1;"))

	// An in-place write.
	write(t, path, "v2")
	next(t, updates, has("pylon.yaml=v2;"))

	// Replaced by rename, as editors and deploy tools do: the watch on the
	// folder survives it.
	tmp := filepath.Join(dir, ".pylon.yaml.swp")
	write(t, tmp, "v3")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	next(t, updates, has("pylon.yaml=v3;"))
	write(t, path, "v4")
	next(t, updates, has("pylon.yaml=v4;"))

	// Deleted: an error update, which the pipeline refuses.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	u := next(t, updates, func(u source.Update) bool { return u.Err != nil })
	if !os.IsNotExist(u.Err) {
		t.Fatalf("err %v, want not-exist", u.Err)
	}
}

func TestFolderWatch(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "b.yaml"), "B")
	write(t, filepath.Join(dir, "a.json"), "A")
	write(t, filepath.Join(dir, "notes.txt"), "ignored")
	write(t, filepath.Join(dir, ".hidden.yaml"), "ignored")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	updates := run(t, dir)
	next(t, updates, has("a.json=A;b.yaml=B;"))
	write(t, filepath.Join(dir, "c.yml"), "C")
	next(t, updates, has("a.json=A;b.yaml=B;c.yml=C;"))
	os.Remove(filepath.Join(dir, "a.json"))
	next(t, updates, has("b.yaml=B;c.yml=C;"))
}

// A burst of writes is read once the burst is over, not once per write.
func TestBurstDebounced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan source.Update, 100)
	// A quiet period far longer than the burst takes to write.
	s := New(Options{Path: path, Quiet: 2 * time.Second, MaxWait: time.Minute})
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	defer func() { cancel(); <-done }()
	next(t, out, has("pylon.yaml=start;"))
	for i := range 50 {
		write(t, path, strings.Repeat("x", i))
	}
	write(t, path, "final")
	u := next(t, out, func(source.Update) bool { return true })
	if contents(u) != "pylon.yaml=final;" {
		t.Fatalf("first update after the burst holds %q, want the final content", contents(u))
	}
	if n := len(out); n != 0 {
		t.Fatalf("%d more updates queued for one burst", n)
	}
}

func TestReadLimits(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "no *.yaml") {
		t.Fatalf("empty folder: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}

// A folder of more config files than MaxFiles is refused before any is
// read.
func TestReadRefusesTooManyFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxFiles + 1 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.yaml", i)), []byte("resources: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Read(dir)
	if err == nil || !strings.Contains(err.Error(), "over the limit of 1000") {
		t.Fatalf("Read of %d files: %v", MaxFiles+1, err)
	}
}

// Dir is absolute, whatever the path: a confined reader takes a relative
// one as relative to its first secret directory.
func TestReadSetsAbsoluteDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("resources: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	files, err := Read("a.yaml")
	if err != nil || len(files) != 1 || !filepath.IsAbs(files[0].Dir) {
		t.Fatalf("Read: %v, %+v", err, files)
	}
}

// counted starts a source with opts on path, counting its reads, and
// returns its updates and the count; it stops with the test. A tiny
// debounce makes every unrelated event that got through a read of its own.
func counted(t *testing.T, opts Options) (*Source, <-chan source.Update, *atomic.Int64) {
	t.Helper()
	var reads atomic.Int64
	opts.Quiet, opts.MaxWait = time.Millisecond, time.Millisecond
	opts.OnRead = func() { reads.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Update, 1000)
	done := make(chan error, 1)
	s := New(opts)
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, out, &reads
}

// noise writes what a log file, an editor and a backup tool write next to
// a config: files Read does not read.
func noise(t *testing.T, dir string, n int) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, "pylon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	for i := range n {
		if _, err := fmt.Fprintf(logf, "line %d\n", i); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, fmt.Sprintf("notes-%d.txt", i%10)), "x")
		write(t, filepath.Join(dir, ".pylon.yaml.swp"), "x")
		write(t, filepath.Join(dir, "pylon.yaml~"), "x")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}

// Issue 13, item 3: writes to other files in the config folder (a log
// file) do not reload the config; only a change of a config file does,
// once.
func TestUnrelatedFilesDoNotReload(t *testing.T) {
	for _, tc := range []struct {
		name   string
		folder bool
	}{{"file", false}, {"folder", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "pylon.yaml")
			write(t, cfg, "v1")
			path := cfg
			if tc.folder {
				path = dir
			}
			_, updates, reads := counted(t, Options{Path: path})
			next(t, updates, has("pylon.yaml=v1;"))
			noise(t, dir, 200)
			// Events arrive in order: once v2 is read, every event of the
			// noise before it has been seen.
			write(t, cfg, "v2")
			next(t, updates, has("pylon.yaml=v2;"))
			// One write may be seen as two events (truncate, write) a
			// debounce apart on a loaded machine: at most one read more.
			if n := reads.Load(); n > 3 {
				t.Fatalf("%d reads of the config, want 2 (the start and the one change): unrelated files reloaded it", n)
			}
			if n := len(updates); n != 0 {
				t.Fatalf("%d more updates after the change", n)
			}
		})
	}
}

// A watched file outside the config folder (a certificate) reloads the
// config; other files in its folder do not.
func TestWatchedFileReloadsOthersInItsFolderDoNot(t *testing.T) {
	dir, certs := t.TempDir(), t.TempDir()
	cfg, cert := filepath.Join(dir, "pylon.yaml"), filepath.Join(certs, "tls.crt")
	write(t, cfg, "v1")
	write(t, cert, "c1")
	s, updates, reads := counted(t, Options{Path: cfg})
	next(t, updates, has("pylon.yaml=v1;"))
	s.Watch([]string{cert})
	// Adding the watch reads once more (a change between the read and the
	// watch would be lost otherwise).
	waitFor(t, func() bool { return reads.Load() == 2 })
	noise(t, certs, 200)
	write(t, cert, "c2")
	// The source reads the config, not the certificate: the read is the
	// sign of the reload.
	waitFor(t, func() bool { return reads.Load() >= 3 })
	noise(t, dir, 200)
	write(t, cfg, "v2")
	next(t, updates, has("pylon.yaml=v2;"))
	// Start, watch added, certificate, config; each write perhaps seen
	// as two events a debounce apart on a loaded machine.
	if n := reads.Load(); n > 6 {
		t.Fatalf("%d reads, want 4 (start, watch added, certificate, config): unrelated files reloaded it", n)
	}
}

// A Kubernetes ConfigMap volume updates by swapping its ..data symlink;
// the config files are symlinks through it and see no event of their own.
func TestKubernetesVolumeSwap(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, data string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "pylon.yaml"), data)
	}
	mk("..2026_1", "v1")
	if err := os.Symlink("..2026_1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "pylon.yaml"), filepath.Join(dir, "pylon.yaml")); err != nil {
		t.Fatal(err)
	}
	_, updates, _ := counted(t, Options{Path: dir})
	next(t, updates, has("pylon.yaml=v1;"))
	// What the kubelet's atomic writer does.
	mk("..2026_2", "v2")
	if err := os.Symlink("..2026_2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	next(t, updates, has("pylon.yaml=v2;"))
}

// waitFor waits for cond, within a bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(wait)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-poll.C:
		case <-deadline:
			t.Fatal("condition not met in time")
		}
	}
}

// runWith starts a source with the given debounce and returns its updates.
func runWith(t *testing.T, path string, quiet, maxWait time.Duration) <-chan source.Update {
	t.Helper()
	return runOpts(t, Options{Path: path, Quiet: quiet, MaxWait: maxWait})
}

// runOpts starts a source of opts and returns its updates.
func runOpts(t *testing.T, opts Options) <-chan source.Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Update)
	done := make(chan error, 1)
	s := New(opts)
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out
}

// A config written aside and renamed into place is whole when it appears:
// it is read at once, not after the quiet period that protects readers
// from files being written in place (an hour here).
func TestRenameIntoPlaceReadAtOnce(t *testing.T) {
	for _, folder := range []bool{false, true} {
		t.Run(fmt.Sprintf("folder=%v", folder), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "pylon.yaml")
			write(t, path, "v1")
			watched := path
			if folder {
				watched = dir
			}
			updates := runWith(t, watched, time.Hour, time.Hour)
			next(t, updates, has("pylon.yaml=v1;"))
			tmp := filepath.Join(dir, ".pylon.yaml.tmp")
			write(t, tmp, "v2")
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
			next(t, updates, has("pylon.yaml=v2;"))
		})
	}
}

// A write in place after a quiet spell is read once its events settle
// (Settle), not after the quiet period; a second write within the quiet
// period is a burst and waits it out. With Settle negative every write
// waits the quiet period.
func TestWriteInPlaceAfterQuietSpellWaitsOnlySettle(t *testing.T) {
	const quiet = 300 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "v1")
	updates := runOpts(t, Options{Path: path, Quiet: quiet, MaxWait: time.Hour, Settle: SuggestedSettle})
	next(t, updates, has("pylon.yaml=v1;"))
	wrote := time.Now()
	write(t, path, "v2")
	next(t, updates, has("pylon.yaml=v2;"))
	if took := time.Since(wrote); took >= quiet {
		t.Fatalf("a write after a quiet spell was read %v after it, not before the %v quiet period", took, quiet)
	}
	// The next write comes within the quiet period of v2's events.
	write(t, path, "v3")
	next(t, updates, has("pylon.yaml=v3;"))
	if took := time.Since(wrote); took < quiet {
		t.Fatalf("a second write %v after the first was read before the %v quiet period", took, quiet)
	}
}

func TestWriteInPlaceWithoutSettleWaitsQuiet(t *testing.T) {
	const quiet = 300 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "v1")
	updates := runOpts(t, Options{Path: path, Quiet: quiet, MaxWait: time.Hour})
	next(t, updates, has("pylon.yaml=v1;"))
	writeWaitsQuiet(t, updates, path, quiet)
}

// writeWaitsQuiet writes v2 to path in place and fails unless it is read
// no sooner than quiet after.
func writeWaitsQuiet(t *testing.T, updates <-chan source.Update, path string, quiet time.Duration) {
	t.Helper()
	wrote := time.Now()
	write(t, path, "v2")
	next(t, updates, has("pylon.yaml=v2;"))
	if took := time.Since(wrote); took < quiet {
		t.Fatalf("a write was read %v after it, before the %v quiet period", took, quiet)
	}
}

// A file moved away and a new one written under its name is not a file
// renamed into place: the new one may be half-written when it appears,
// and waits out the quiet period like any write.
func TestMoveAwayThenWriteWaitsQuiet(t *testing.T) {
	const quiet = 300 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	write(t, path, "v1")
	updates := runWith(t, dir, quiet, time.Hour)
	next(t, updates, has("pylon.yaml=v1;"))
	if err := os.Rename(path, filepath.Join(t.TempDir(), "old.yaml")); err != nil {
		t.Fatal(err)
	}
	// The folder without it is read (and refused) first: the new file's
	// Create then comes right after the Rename, as a rename into place's
	// does, with nothing pending.
	next(t, updates, func(u source.Update) bool { return !has("pylon.yaml=v1;")(u) })
	writeWaitsQuiet(t, updates, path, quiet)
}

// By default a file written in place is read once it has been quiet for
// Quiet, whether or not a quiet spell came before: a writer that pauses
// mid-file (here 20 ms) is not read in part, where the cut config may
// still parse and be served with half its objects gone.
func TestWriteInPlaceWithAPauseIsNotReadInPart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pylon.yaml")
	part1, part2 := "services:\n  - name: a\n", "  - name: b\n"
	write(t, path, part1+part2)
	updates := runOpts(t, Options{Path: path, Quiet: 100 * time.Millisecond, MaxWait: time.Second})
	next(t, updates, has("pylon.yaml="+part1+part2+";"))
	time.Sleep(150 * time.Millisecond) // a quiet spell longer than Quiet, as the leading edge needs
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(part1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the writer's pause, the subject of the test
	if _, err := f.WriteString(part2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	u := next(t, updates, func(source.Update) bool { return true })
	if got := contents(u); got != "pylon.yaml="+part1+part2+";" {
		t.Fatalf("the first read after an in-place write paused mid-file was %q, want the whole file", got)
	}
}
