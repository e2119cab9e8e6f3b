package token

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/pylon-xds/pylon/internal/seal"
)

// Pair is the admin API's two tokens: Write authorises writes and reads,
// Read only reads (the admin API's reads and CSDS).
type Pair struct{ Write, Read string }

// FilesOptions say where the tokens live and how often their files are
// checked for a rotation.
type FilesOptions struct {
	WriteFile, ReadFile string
	// CheckEvery bounds how often the files are checked (default 1s).
	CheckEvery time.Duration
	Logger     *slog.Logger
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time
}

// Files are the tokens as their files hold them, following a rotation:
// the files are checked lazily, at most once per CheckEvery, when a
// caller asks for the tokens (no goroutine, no watcher to stop), as
// certs.Server checks certificate files. A replaced token takes effect at
// the first request after the check, and the old one stops working then.
//
// A file that becomes unreadable, empty or invalid, or a pair whose two
// tokens are equal (the read token would then write), keeps the previous
// good pair and is logged once per state of the files, naming the file,
// never the token.
type Files struct {
	o   FilesOptions
	log *slog.Logger
	cur atomic.Pointer[Pair]

	mu   sync.Mutex // held while checking the files
	next time.Time
	seen [2]os.FileInfo // the files as last read, good or bad
}

// LoadFiles reads both files; unlike a later rotation, a bad file or equal
// tokens at start are an error.
func LoadFiles(o FilesOptions) (*Files, error) {
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Files{o: o, log: o.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.seen = f.stat()
	p, err := f.read()
	if err != nil {
		return nil, err
	}
	if err := p.distinct(o); err != nil {
		return nil, err
	}
	f.cur.Store(&p)
	f.next = o.Now().Add(o.CheckEvery)
	return f, nil
}

// Current returns the tokens, first re-reading the files if one changed
// since the last check and CheckEvery has passed. A caller that finds
// another checking does not wait: it gets the current pair.
func (f *Files) Current() Pair {
	if f.mu.TryLock() {
		f.check(false)
		f.mu.Unlock()
	}
	return *f.cur.Load()
}

// Reload re-reads the files now, changed or not (SIGHUP: a copy that kept
// the old file's time and size is read too), and reports whether the
// tokens changed.
func (f *Files) Reload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check(true)
}

// check re-reads the files when due (or forced); f.mu is held.
func (f *Files) check(force bool) bool {
	now := f.o.Now()
	if !force && now.Before(f.next) {
		return false
	}
	f.next = now.Add(f.o.CheckEvery)
	st := f.stat()
	if !force && sameFiles(st, f.seen) {
		return false
	}
	f.seen = st
	old := *f.cur.Load()
	p, err := f.read()
	if err == nil {
		err = p.distinct(f.o)
	}
	if err != nil {
		f.log.Error("admin token files changed but cannot be used; the previous tokens stay in force", "err", err)
		return false
	}
	if p == old {
		return false
	}
	f.cur.Store(&p)
	f.log.Info("admin tokens reloaded: the previous ones no longer work",
		"write_token_changed", p.Write != old.Write, "read_token_changed", p.Read != old.Read,
		"write_token_file", f.o.WriteFile, "read_token_file", f.o.ReadFile)
	return true
}

func (f *Files) read() (Pair, error) {
	w, err := ReadFile(f.o.WriteFile)
	if err != nil {
		return Pair{}, fmt.Errorf("write token: %w", err)
	}
	r, err := ReadFile(f.o.ReadFile)
	if err != nil {
		return Pair{}, fmt.Errorf("read token: %w", err)
	}
	return Pair{Write: w, Read: r}, nil
}

// distinct refuses a read token equal to the write token: whoever holds
// the read token could then write.
func (p Pair) distinct(o FilesOptions) error {
	if p.Write == p.Read {
		return fmt.Errorf("the write token (file %s) and the read token (file %s) are the same: the read token would authorise writes; give each file its own token", o.WriteFile, o.ReadFile)
	}
	return nil
}

func (f *Files) stat() [2]os.FileInfo {
	var st [2]os.FileInfo
	st[0], _ = os.Stat(f.o.WriteFile)
	st[1], _ = os.Stat(f.o.ReadFile)
	return st
}

// sameFiles reports whether the files look unchanged: a rename over a file
// changes its inode, an in-place write its size or modification time.
func sameFiles(a, b [2]os.FileInfo) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x == nil || y == nil {
			if x != y {
				return false
			}
			continue
		}
		if !os.SameFile(x, y) || !x.ModTime().Equal(y.ModTime()) || x.Size() != y.Size() || x.Mode() != y.Mode() {
			return false
		}
	}
	return true
}

// maxFile bounds a token file read.
const maxFile = 4096

// ReadFile reads a token file, refusing one that is not a regular file
// (a link included), that users other than its owner can read or write,
// or that holds no token or one with spaces or control characters inside
// (no Authorization header could carry it). Errors name the file, never
// its contents.
func ReadFile(path string) (string, error) {
	b, err := seal.ReadPrivate(path, "token file", maxFile)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
		return "", fmt.Errorf("token file %s is empty", path)
	case strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "", fmt.Errorf("token file %s holds spaces or control characters inside its token", path)
	}
	return t, nil
}
