// Package source defines what a source of truth hands to the pipeline, and
// the debouncing and pacing that turn bursts of changes into few updates.
package source

import (
	"context"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
)

// Update is the whole configuration as a source read it at one moment.
type Update struct {
	// Files is every configuration file, in a stable order.
	Files []config.File
	// Err is set when the source could not read its configuration (a file
	// vanished, a folder became unreadable). The pipeline refuses such an
	// update like an invalid config and keeps serving the last good one.
	Err error
	// AcceptedAt is when the change was first noticed, for push latency.
	AcceptedAt time.Time
	// Revision names what the source read in its own terms (a Git
	// commit's SHA), shown with the config it became; empty for sources
	// without one.
	Revision string
}

// Debouncer merges bursts of events. It fires once the events have been
// quiet for Quiet, or MaxWait after the first event of a burst, whichever
// comes first, so a steady trickle of writes cannot postpone a reload
// forever. With Settle, the first events after a quiet spell fire at once
// but for Settle. It is a plain value driven with explicit times, so
// tests need no clock.
type Debouncer struct {
	Quiet   time.Duration
	MaxWait time.Duration
	// Settle, when positive, is the leading edge: events that begin
	// after a quiet spell (none for Quiet) fire Settle after the last of
	// them rather than Quiet, so the first change after a quiet spell is
	// published at once but for a file's write settling (the events of
	// one save come within a millisecond or two of each other). Events
	// within Quiet of the last are a burst, batched by Quiet and MaxWait
	// as without. Zero: every burst waits Quiet.
	Settle time.Duration

	pending     bool
	first, last time.Time
	// whole: every event of the pending burst brought a whole file
	// (Whole), so there is nothing to wait for.
	whole bool
	// leading: the pending events began after a quiet spell (Settle).
	leading bool
}

// Event records an event at now.
func (d *Debouncer) Event(now time.Time) {
	if !d.pending {
		d.leading = d.Settle > 0 && (d.last.IsZero() || now.Sub(d.last) >= d.Quiet)
		d.pending = true
		d.first = now
	}
	d.last = now
	d.whole = false
}

// Whole records an event at now that brought a whole file, such as one
// renamed into place: a burst made only of those is due at once, since the
// quiet period protects readers from files still being written in place.
func (d *Debouncer) Whole(now time.Time) {
	whole := !d.pending || d.whole
	d.Event(now)
	d.whole = whole
}

// Pending reports whether events are waiting to fire.
func (d *Debouncer) Pending() bool { return d.pending }

// First is when the pending burst began.
func (d *Debouncer) First() time.Time { return d.first }

// Due returns when the pending burst should fire; ok is false when nothing
// is pending.
func (d *Debouncer) Due() (due time.Time, ok bool) {
	if !d.pending {
		return time.Time{}, false
	}
	if d.whole {
		return d.last, true
	}
	due = d.last.Add(d.Quiet)
	if d.leading {
		due = d.last.Add(d.Settle)
	}
	if limit := d.first.Add(d.MaxWait); d.MaxWait > 0 && limit.Before(due) {
		due = limit
	}
	return due, true
}

// Fire reports whether the pending burst is due at now, and if so resets.
func (d *Debouncer) Fire(now time.Time) bool {
	due, ok := d.Due()
	if !ok || now.Before(due) {
		return false
	}
	d.pending = false
	return true
}

// Replay forwards updates from in to out and, on each tick of again,
// sends the latest update once more, stamped with the tick's time: the
// pipeline re-reads the files that update names (certificates), which
// changed while the config itself did not. A tick before the first update
// sends nothing. It returns when ctx ends or in closes.
func Replay(ctx context.Context, in <-chan Update, again <-chan time.Time, out chan<- Update) error {
	var last *Update
	for {
		var u Update
		select {
		case <-ctx.Done():
			return nil
		case got, ok := <-in:
			if !ok {
				return nil
			}
			u, last = got, &got
		case at := <-again:
			if last == nil {
				continue
			}
			u = *last
			u.AcceptedAt = at
		}
		select {
		case out <- u:
		case <-ctx.Done():
			return nil
		}
	}
}
