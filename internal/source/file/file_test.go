package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Update)
	done := make(chan error, 1)
	s := New(Options{Path: path, Quiet: 20 * time.Millisecond, MaxWait: 200 * time.Millisecond})
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out
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
