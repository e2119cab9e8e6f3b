package file

import (
	"context"
	"log/slog"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/pylon-xds/pylon/internal/source"
)

// loop is the event loop Source and Files share: relevant file events,
// debounced into one fire per burst; a periodic resync in case an event
// was lost; and changes to the set of other files watched (the
// certificates a config names).
type loop struct {
	w   *fsnotify.Watcher
	rel *relevance
	// keep is a folder watched for the config itself, never dropped when
	// the set of other files changes ("" for none).
	keep  string
	paths <-chan []string
	// watched are the folders watched for paths (syncDirs).
	watched map[string]bool

	quiet, maxWait, resync time.Duration
	// spacing, when set and longer than quiet, spaces the reads of a
	// burst instead of quiet (Options.Spacing); nil: quiet.
	spacing func() time.Duration
	// settle is the debouncer's leading edge (source.Debouncer.Settle):
	// 0 for none.
	settle time.Duration
	// reread asks for a resync now (SIGHUP); nil never does.
	reread  <-chan struct{}
	onEvent func()
	log     *slog.Logger
	what    string // "config" or "secret file", for logs
}

// run calls fire after each debounced burst, with when it began, and
// resync on each resync tick; either returning false ends the loop. It
// returns when ctx ends or the watcher closes.
func (l *loop) run(ctx context.Context, fire, resync func(time.Time) bool) error {
	l.watched = map[string]bool{}
	var tick <-chan time.Time
	if l.resync > 0 {
		t := time.NewTicker(l.resync)
		defer t.Stop()
		tick = t.C
	}
	deb := source.Debouncer{Quiet: l.quiet, MaxWait: l.maxWait, Settle: l.settle}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// fired is when the last burst was read. A burst that begins within
	// quiet of it (renames into place many times a second) is read at
	// most once per quiet period: every read is a whole compile and a
	// response to every proxy, so reading each rename at once sent the
	// proxies more, emptier responses and converged later. The first
	// change after a quiet spell is still read at once.
	var fired time.Time
	gap := l.quiet // the spacing after fired, asked once a read
	arm := func() {
		if due, ok := deb.Due(); ok {
			timer.Reset(time.Until(paced(due, fired, gap)))
		}
	}
	// renamedFrom: the previous event, relevant or not, renamed this file
	// away. A Create of another name right after it is that file renamed
	// into place (inotify reports the two halves of a rename back to
	// back): the file is whole, as written aside by a deploy tool or
	// swapped in by Kubernetes, so its burst need not wait out the quiet
	// period. A Create of the same name is a file moved away and a new
	// one being written in its place: that waits like any write.
	renamedFrom := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-l.w.Events:
			if !ok {
				return nil
			}
			renamedIn := renamedFrom != "" && renamedFrom != ev.Name && ev.Has(fsnotify.Create)
			renamedFrom = ""
			if ev.Has(fsnotify.Rename) {
				renamedFrom = ev.Name
			}
			if !l.rel.relevant(ev.Name) {
				// Not even a debug line: a log file written in a watched
				// folder would otherwise log its own writes forever.
				continue
			}
			l.log.Debug(l.what+" event", "file", ev.Name, "op", ev.Op.String())
			if l.onEvent != nil {
				l.onEvent()
			}
			if renamedIn {
				deb.Whole(time.Now())
			} else {
				deb.Event(time.Now())
			}
			arm()
		case err, ok := <-l.w.Errors:
			if !ok {
				return nil
			}
			// An overflow loses events; the resync catches up.
			l.log.Warn(l.what+" watch error", "err", err)
		case now := <-timer.C:
			if !deb.Fire(now) {
				arm()
				continue
			}
			fired, gap = now, l.gap()
			if !fire(deb.First()) {
				return nil
			}
		case now := <-tick:
			if !resync(now) {
				return nil
			}
		case <-l.reread:
			if !resync(time.Now()) {
				return nil
			}
		case paths := <-l.paths:
			l.rel.watch(paths)
			if syncDirs(l.w, l.watched, paths, l.keep, l.log) {
				// A file may have changed between its read and the start
				// of its watch: read once more.
				deb.Event(time.Now())
				arm()
			}
		}
	}
}

// paced is when a burst due at due is read, given that the last was read
// at fired: no sooner than quiet after it.
func paced(due, fired time.Time, quiet time.Duration) time.Time {
	if next := fired.Add(quiet); !fired.IsZero() && next.After(due) {
		return next
	}
	return due
}

// gap is the least time between two reads of a burst (source.Gap).
func (l *loop) gap() time.Duration { return source.Gap(l.quiet, l.spacing) }
