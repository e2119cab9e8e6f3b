package file

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
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
