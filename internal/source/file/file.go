// Package file is the GitOps source: a config file or a folder of them,
// watched with fsnotify and re-read periodically.
package file

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/source"
)

// Options configures a Source.
type Options struct {
	// Path is a file, or a folder whose *.yaml, *.yml and *.json files
	// (not in subfolders, not hidden) together make the configuration.
	Path string
	// Quiet and MaxWait debounce bursts of file events.
	Quiet   time.Duration
	MaxWait time.Duration
	// Spacing, when set and longer than Quiet, is the least time
	// between two reads in a burst (see loop.run's fired): the daemon's
	// grows with the proxies each publish reaches. Read at each burst.
	Spacing func() time.Duration
	// Settle, when positive, is how long a change after a quiet spell
	// waits for its file's write to settle before the config is read
	// (source.Debouncer's leading edge): an editor's save is a few
	// events within a millisecond or two. Changes within Quiet of the
	// last are a burst and wait Quiet. Zero (the default): every change
	// written in place waits Quiet, so that a writer pausing mid-file for
	// less than Quiet is not read in part (a cut config that still parses
	// would be served, its missing listeners and clusters dropped); a
	// rename into place is read at once either way, unless it comes
	// within Quiet of the last read (then Quiet after that read).
	Settle time.Duration
	// Resync re-reads the configuration this often even without events, in
	// case an event was lost (network file systems, overflowing queues).
	// Zero disables it.
	Resync time.Duration
	// Reread, when it receives, re-reads the configuration at once, as a
	// resync does (the daemon's SIGHUP).
	Reread <-chan struct{}
	Logger *slog.Logger
	// OnEvent and OnRead, if set, are told of each relevant file event
	// (one on a config file or a watched file; others are ignored) and
	// each read of the config (for metrics: events per read is the
	// batching).
	OnEvent, OnRead func()
}

// SuggestedSettle is a Settle for writers that write a file whole in one
// go: a few times the spread of one save's events, short beside a
// publish.
const SuggestedSettle = 10 * time.Millisecond

// MaxFiles bounds the config files of a folder (source.MaxFiles).
const MaxFiles = source.MaxFiles

// Source watches a file or folder.
type Source struct {
	opts Options
	log  *slog.Logger
	// extra carries the latest set of other files to watch (the
	// certificates a config names); one slot, newest wins.
	extra chan []string
}

// New returns a source for opts.
func New(opts Options) *Source {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{opts: opts, log: log, extra: make(chan []string, 1)}
}

// Watch makes the source also watch paths (their folders, so that a file
// replaced by rename is seen): a change there reloads the config, which
// re-reads them. Each call replaces the previous set. Safe to call from any
// goroutine.
func (s *Source) Watch(paths []string) { replaceLatest(s.extra, paths) }

// Run sends the configuration to out once at the start and again after every
// debounced burst of changes and every resync, until ctx ends.
func (s *Source) Run(ctx context.Context, out chan<- source.Update) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.opts.Path, err)
	}
	defer w.Close()
	// Watch the folder even for a single file: editors and deploy tools
	// replace a file by renaming a new one over it, which ends a watch on
	// the file itself. Events for other files in it are ignored (see
	// relevant).
	dir := s.opts.Path
	isDir := true
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir, isDir = filepath.Dir(dir), false
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	rel := newRelevance(s.opts.Path, isDir)

	var last []config.File // what the last read sent, reused while the file is the same
	send := func(at time.Time) bool {
		if s.opts.OnRead != nil {
			s.opts.OnRead()
		}
		files, err := reread(s.opts.Path, last)
		if err == nil {
			last = files
		}
		select {
		case out <- source.Update{Files: files, Err: err, AcceptedAt: at}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !send(time.Now()) {
		return nil
	}

	l := &loop{
		w: w, rel: rel, keep: absPath(dir), paths: s.extra, what: "config", log: s.log, onEvent: s.opts.OnEvent,
		quiet: s.opts.Quiet, maxWait: s.opts.MaxWait, settle: s.settle(), resync: s.opts.Resync, reread: s.opts.Reread,
		spacing: s.opts.Spacing,
	}
	return l.run(ctx, send, send)
}

// relevance decides which file events can change what Run reads: a config
// file (a *.yaml, *.yml or *.json file that Read would read; with a single
// file, that file), a file given to Watch, or a Kubernetes volume swap.
// Anything else in a watched folder (a log file, an editor's swap file) is
// ignored: re-reading on it cannot change the config, and a log file there
// would otherwise reload once per line it is written.
type relevance struct {
	// file is the config file, absolute; empty when the config is a folder.
	file string
	// dir is the config folder, absolute; empty for a single file.
	dir string
	// watched are the files given to Watch, absolute.
	watched map[string]bool
	// dirs are the folders of the config and the watched files: their
	// Kubernetes volume swap is relevant.
	dirs map[string]bool
}

// k8sData is the symlink a Kubernetes ConfigMap or Secret volume swaps
// atomically on an update: the files in the volume are symlinks through
// it, so their own names see no event.
const k8sData = "..data"

func newRelevance(path string, isDir bool) *relevance {
	r := &relevance{watched: map[string]bool{}}
	abs := absPath(path)
	if isDir {
		r.dir = abs
	} else {
		r.file = abs
	}
	r.watch(nil)
	return r
}

// watch replaces the set of watched files.
func (r *relevance) watch(paths []string) {
	r.watched = map[string]bool{}
	r.dirs = map[string]bool{}
	if r.dir != "" {
		r.dirs[r.dir] = true
	} else if r.file != "" {
		r.dirs[filepath.Dir(r.file)] = true
	}
	for _, p := range paths {
		p = absPath(p)
		r.watched[p] = true
		r.dirs[filepath.Dir(p)] = true
	}
}

// relevant reports whether an event on name may change what Run reads.
func (r *relevance) relevant(name string) bool {
	name = absPath(name)
	dir, base := filepath.Dir(name), filepath.Base(name)
	switch {
	case r.watched[name], name == r.file:
		return true
	case base == k8sData:
		return r.dirs[dir]
	case dir == r.dir:
		return !strings.HasPrefix(base, ".") && source.IsConfigName(base)
	}
	return false
}

// absPath is p cleaned and absolute, so that the names fsnotify reports
// compare equal to the paths configured (p as it is if the working
// directory is gone).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// Read reads the configuration at path: the file, or every config file in
// the folder in name order.
func Read(path string) ([]config.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		f, _, err := readFile(path, nil)
		if err != nil {
			return nil, err
		}
		return []config.File{f}, nil
	}
	return source.ReadFolder(os.DirFS(path), path, absPath(path))
}

// reread is Read, but a single file that holds the bytes last (what Read
// returned before) holds is last itself, compared as it is read rather
// than read into a new copy: a resync every 30 s of an unchanged large
// config allocates next to nothing.
func reread(path string, last []config.File) ([]config.File, error) {
	if len(last) != 1 || last[0].Path != path {
		return Read(path)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return Read(path)
	}
	f, same, err := readFile(path, last[0].Data)
	if err != nil {
		return nil, err
	}
	if same && f.Dir == last[0].Dir {
		return last, nil
	}
	return []config.File{f}, nil
}

// readFile reads the config file at path. If it holds the bytes was
// holds (nil: none), its Data is was and it reports true.
func readFile(path string, was []byte) (config.File, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return config.File{}, false, err
	}
	defer f.Close()
	data, same := was, holds(f, was)
	if !same {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			// Read one byte past the limit so that config.Load can
			// report the size.
			data, err = source.ReadAtMost(f, config.MaxFileBytes+1)
		}
	}
	if err != nil {
		return config.File{}, false, fmt.Errorf("%s: %w", path, err)
	}
	// Dir is absolute: a relative one would be taken, by a confined reader,
	// as relative to its first secret directory.
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return config.File{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return config.File{Path: path, Data: data, Dir: dir}, same, nil
}

// holds reports whether f, read from where it is to its end, holds
// exactly want; it reads in small pieces, keeping none.
func holds(f *os.File, want []byte) bool {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(want)) || len(want) == 0 {
		return false
	}
	buf := make([]byte, min(len(want), 64<<10))
	for {
		n, err := f.Read(buf)
		if n > len(want) || !bytes.Equal(buf[:n], want[:n]) {
			return false
		}
		want = want[n:]
		if err == io.EOF {
			return len(want) == 0
		}
		if err != nil {
			return false
		}
	}
}

// settle is the Debouncer's Settle for opts.Settle.
func (s *Source) settle() time.Duration { return max(s.opts.Settle, 0) }
