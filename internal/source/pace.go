package source

import "time"

// Pacer paces a source whose every change is whole (a Kubernetes object,
// a Git commit), as the file source paces a file renamed into place: the
// first change after a quiet spell is sent at once, and the changes of a
// burst are folded into updates at least Gap apart. Each update is a
// compile and a response to every proxy whose resources it changed, so a
// burst sent change by change would give the proxies more, emptier
// responses and converge later; waiting out a quiet period before every
// change would only delay the first. Like Debouncer, it is a plain value
// driven with explicit times, so tests need no clock.
type Pacer struct {
	// Quiet is the least time between two updates (--debounce).
	Quiet time.Duration
	// Spacing, when set and longer than Quiet, is the least time between
	// two updates instead, asked once an update (the daemon's grows with
	// the responses the last publish sent, up to --debounce-max); it is
	// bounded by MaxSpacing whatever it returns.
	Spacing func() time.Duration

	pending bool
	first   time.Time
	// sent is when the last update went, gap the least time to the next
	// (asked then).
	sent time.Time
	gap  time.Duration
}

// MaxSpacing bounds a Pacer's gap, whatever Spacing asks.
const MaxSpacing = 5 * time.Second

// Event records a change at now.
func (p *Pacer) Event(now time.Time) {
	if !p.pending {
		p.pending, p.first = true, now
	}
}

// Pending reports whether changes are waiting to be sent.
func (p *Pacer) Pending() bool { return p.pending }

// First is when the pending changes began.
func (p *Pacer) First() time.Time { return p.first }

// Due returns when the pending changes should be sent: at once, unless
// the last update went less than its gap ago; ok is false when nothing is
// pending.
func (p *Pacer) Due() (due time.Time, ok bool) {
	if !p.pending {
		return time.Time{}, false
	}
	if next := p.sent.Add(p.gap); !p.sent.IsZero() && next.After(p.first) {
		return next, true
	}
	return p.first, true
}

// Fire reports whether the pending changes are due at now, and if so
// takes them: the caller sends (or, for Git, looks for) them, and calls
// Sent if an update went.
func (p *Pacer) Fire(now time.Time) bool {
	due, ok := p.Due()
	if !ok || now.Before(due) {
		return false
	}
	p.pending = false
	return true
}

// Sent records an update sent at now, whatever made it (a burst fired, a
// periodic poll), and asks Spacing for the gap to the next.
func (p *Pacer) Sent(now time.Time) {
	p.sent, p.gap = now, Gap(p.Quiet, p.Spacing)
}

// Gap is the least time between two updates of a burst: quiet, or what
// spacing (nil: none) asks when longer, bounded by MaxSpacing. The file
// source, which paces its reads with a Debouncer of its own, spaces them
// by it too.
func Gap(quiet time.Duration, spacing func() time.Duration) time.Duration {
	if spacing == nil {
		return quiet
	}
	return max(quiet, min(spacing(), MaxSpacing))
}
