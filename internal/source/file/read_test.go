package file

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
)

// A config file is read into one buffer of its size: a resync re-reads a
// large file every 30 s, and growing a buffer by doubling allocated twice
// or three times the file each time. Not a timed test.
func TestReadAllocatesTheFileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	data := bytes.Repeat([]byte("x"), 6<<20+123)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	files, err := Read(path)
	runtime.ReadMemStats(&after)
	if err != nil || len(files) != 1 || !bytes.Equal(files[0].Data, data) {
		t.Fatalf("read %d files, %v", len(files), err)
	}
	per := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(data))
	t.Logf("reading allocated %.2f bytes per file byte", per)
	if per > 1.1 {
		t.Errorf("reading allocated %.2f bytes per file byte, want at most 1.1", per)
	}
	// A file over the limit is still read one byte past it, for
	// config.Load to refuse with its size.
	big := filepath.Join(t.TempDir(), "over.json")
	if err := os.WriteFile(big, make([]byte, config.MaxFileBytes+10), 0o600); err != nil {
		t.Fatal(err)
	}
	if files, err := Read(big); err != nil || len(files[0].Data) != config.MaxFileBytes+1 {
		t.Fatalf("a file over the limit: %v, %d bytes read", err, len(files[0].Data))
	}
}

// A re-read (a resync, SIGHUP) of a file whose bytes have not changed
// sends the bytes it sent last, compared as they are read, not a new copy
// of the file: a resync of a 15 MiB config every 30 s otherwise grew the
// heap by the file's size each time. A file changed in place to the same
// size is read anew.
func TestRereadOfAnUnchangedFileSendsTheSameBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pylon.json")
	a := strings.Repeat("a", 300<<10)
	write(t, path, a)
	reread := make(chan struct{})
	_, updates, _ := counted(t, Options{Path: path, Reread: reread})
	first := next(t, updates, has("pylon.json="+a+";"))
	for range 3 {
		reread <- struct{}{}
		u := next(t, updates, has("pylon.json="+a+";"))
		if &u.Files[0].Data[0] != &first.Files[0].Data[0] {
			t.Fatal("a re-read of an unchanged file sent a new copy of it")
		}
	}
	b := a[:len(a)-1] + "b"
	write(t, path, b)
	next(t, updates, has("pylon.json="+b+";"))
	reread <- struct{}{}
	next(t, updates, has("pylon.json="+b+";"))
}
