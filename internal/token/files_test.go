package token

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// put replaces a token file by rename, as a rotation does.
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func loaded(t *testing.T, w, r string) (*Files, *clock, *bytes.Buffer, [2]string) {
	t.Helper()
	dir := t.TempDir()
	paths := [2]string{filepath.Join(dir, "admin-token"), filepath.Join(dir, "read-token")}
	put(t, paths[0], w+"\n")
	put(t, paths[1], r+"\n")
	c := &clock{now: time.Unix(1000, 0)}
	var logs bytes.Buffer
	f, err := LoadFiles(FilesOptions{WriteFile: paths[0], ReadFile: paths[1], Now: c.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, &logs, paths
}

// Finding 8 (issue 30): a rotated file is read at the first check past
// CheckEvery; a bad one (empty, spaces inside, equal to the other) keeps
// the previous pair and is logged, naming the file and never a token.
func TestFilesFollowRotation(t *testing.T) {
	f, c, logs, paths := loaded(t, "write-1", "read-1")
	if got := f.Current(); got != (Pair{"write-1", "read-1"}) {
		t.Fatalf("loaded %+v", got)
	}
	put(t, paths[1], "read-2\n")
	if got := f.Current(); got.Read != "read-1" {
		t.Fatalf("read before CheckEvery passed: %+v", got)
	}
	c.add(time.Second)
	if got := f.Current(); got != (Pair{"write-1", "read-2"}) {
		t.Fatalf("after the rotation: %+v", got)
	}
	for _, bad := range []string{"", "  \n", "two words", "write-1"} {
		put(t, paths[1], bad)
		c.add(time.Second)
		if got := f.Current(); got != (Pair{"write-1", "read-2"}) {
			t.Fatalf("read token file %q: %+v, want the previous pair", bad, got)
		}
	}
	for _, want := range []string{"is empty", "spaces or control characters", "are the same", paths[1]} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, tok := range []string{"write-1", "read-1", "read-2", "two words"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("log shows token %q:\n%s", tok, logs)
		}
	}
	// Reload reads at once, changed stamps or not.
	put(t, paths[0], "write-3")
	put(t, paths[1], "read-3")
	if !f.Reload() || f.Current() != (Pair{"write-3", "read-3"}) {
		t.Fatalf("Reload: %+v", f.Current())
	}
	if f.Reload() {
		t.Fatal("Reload of unchanged files reported a change")
	}
}

// Equal tokens, or a token file others can read, are refused at start.
func TestLoadFilesRefuses(t *testing.T) {
	dir := t.TempDir()
	w, r := filepath.Join(dir, "admin-token"), filepath.Join(dir, "read-token")
	put(t, w, "same")
	put(t, r, "same\n")
	_, err := LoadFiles(FilesOptions{WriteFile: w, ReadFile: r})
	if err == nil || !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), r) || strings.Contains(err.Error(), "same\"") {
		t.Fatalf("equal tokens: %v", err)
	}
	put(t, r, "other")
	if err := os.Chmod(r, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFiles(FilesOptions{WriteFile: w, ReadFile: r}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a group-readable token file: %v", err)
	}
}
