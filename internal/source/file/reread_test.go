package file

import (
	"path/filepath"
	"testing"
)

// Finding 8 (issue 30): a receive on Reread (the daemon's SIGHUP) reads
// the config at once, with no file event and no resync.
func TestRereadReadsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pylon.yaml")
	write(t, path, "a")
	reread := make(chan struct{})
	_, updates, reads := counted(t, Options{Path: path, Reread: reread})
	next(t, updates, has("pylon.yaml=a;"))
	before := reads.Load()
	reread <- struct{}{}
	next(t, updates, has("pylon.yaml=a;"))
	if reads.Load() != before+1 {
		t.Fatalf("%d reads after Reread, want %d", reads.Load(), before+1)
	}
}
