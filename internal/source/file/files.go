package file

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// FilesOptions configures a Files watcher.
type FilesOptions struct {
	// Quiet and MaxWait debounce bursts of events (a rotation writes a
	// certificate and its key).
	Quiet, MaxWait time.Duration
	// Resync reports a change this often even without events, in case one
	// was lost, as Source does; zero disables it.
	Resync time.Duration
	// Reread, when it receives, reports a change at once, as a resync
	// does (the daemon's SIGHUP).
	Reread <-chan struct{}
	Logger *slog.Logger
	// OnEvent, if set, is told of each relevant file event (for metrics).
	OnEvent func()
}

// Files watches a set of files that are not a config: the certificates and
// keys named by a config kept elsewhere (the embedded store). It only
// reports that they changed; whoever reads them re-reads them. This is what
// Source does with Watch in file mode.
type Files struct {
	opts    FilesOptions
	log     *slog.Logger
	paths   chan []string
	changed chan time.Time
}

// NewFiles returns a watcher for opts; it watches nothing until Watch.
func NewFiles(opts FilesOptions) *Files {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Files{opts: opts, log: log, paths: make(chan []string, 1), changed: make(chan time.Time, 1)}
}

// Watch replaces the set of files watched. Safe to call from any goroutine;
// it never blocks (the newest set wins).
func (f *Files) Watch(paths []string) { replaceLatest(f.paths, paths) }

// Changed receives, after a debounced burst of changes to the watched files
// (or a resync), when the burst began. It holds one pending change: a
// receiver that is behind re-reads once for all of them.
func (f *Files) Changed() <-chan time.Time { return f.changed }

// Run watches until ctx ends.
func (f *Files) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching secret files: %w", err)
	}
	defer w.Close()
	rel := &relevance{}
	rel.watch(nil)
	l := &loop{
		w: w, rel: rel, paths: f.paths, what: "secret file", log: f.log, onEvent: f.opts.OnEvent,
		quiet: f.opts.Quiet, maxWait: f.opts.MaxWait, resync: f.opts.Resync, reread: f.opts.Reread,
	}
	notify := func(at time.Time) bool { f.notify(at); return true }
	return l.run(ctx, notify, func(now time.Time) bool {
		if len(l.watched) > 0 {
			f.notify(now)
		}
		return true
	})
}

// notify leaves one pending change; one already pending covers this one.
func (f *Files) notify(at time.Time) {
	select {
	case f.changed <- at:
	default:
	}
}

// replaceLatest puts v in the one-slot channel ch, dropping an older value
// not yet taken.
func replaceLatest[T any](ch chan T, v T) {
	for {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// syncDirs makes w watch exactly the folders of paths (but skip, watched
// anyway), recording them in watched; it reports whether a folder was
// added. A folder that cannot be watched is logged: the resync still
// catches changes there.
func syncDirs(w *fsnotify.Watcher, watched map[string]bool, paths []string, skip string, log *slog.Logger) (added bool) {
	want := map[string]bool{}
	for _, p := range paths {
		if d := filepath.Dir(absPath(p)); d != skip {
			want[d] = true
		}
	}
	for d := range watched {
		if !want[d] {
			_ = w.Remove(d)
			delete(watched, d)
		}
	}
	for d := range want {
		if watched[d] {
			continue
		}
		if err := w.Add(d); err != nil {
			log.Warn("cannot watch a folder the config reads from", "dir", d, "err", err)
			continue
		}
		watched[d] = true
		added = true
	}
	return added
}
