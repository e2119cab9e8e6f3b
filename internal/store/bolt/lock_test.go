package bolt

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second open of a data folder another process holds says so, naming
// the database, the process (from the pid file the holder wrote) and how
// to find it otherwise; not a bare "timeout". The holder's Close removes
// its pid file.
func TestOpenHeldElsewhereSaysWho(t *testing.T) {
	dir := t.TempDir()
	first, err := OpenWith(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	db := filepath.Join(dir, "pylon.db")
	_, err = OpenWith(dir, Options{lockWait: 50 * time.Millisecond})
	if err == nil {
		t.Fatal("a second open of a held store succeeded")
	}
	for _, want := range []string{"another process holds", db, "process " + strconv.Itoa(os.Getpid()), "fuser " + db} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	// Without the pid file (an older Pylon holds it): how to find it.
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil {
		t.Fatal(err)
	}
	_, err = OpenWith(dir, Options{lockWait: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "another process holds") || !strings.Contains(err.Error(), "fuser "+db) || strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Errorf("without a pid file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pidFile)); !os.IsNotExist(err) {
		t.Errorf("the pid file outlives Close: %v", err)
	}
}
