package status

import (
	"slices"
	"time"
)

// Forget drops stream id at once, open or closed, without keeping it among
// the recently closed: for a stream that was one REST poll, whose end is
// not a proxy leaving (its next poll comes within a second or so). Kept,
// a fleet of polling proxies would push every real disconnect out of the
// bounded list of closed streams within seconds.
func (t *Tracker) Forget(id uint64) {
	sh := t.lock(id)
	s := sh.streams[id]
	if s == nil {
		sh.mu.Unlock()
		return
	}
	if s.gone == nil {
		t.freeze(s)
		s.gone = new(time.Time{})
	} else {
		// Refused or closed first: out of the closed list too, where it
		// would hold a place of the MaxGone.
		t.mu.Lock()
		t.gone = slices.DeleteFunc(t.gone, func(g goneStream) bool { return g.id == id })
		t.mu.Unlock()
	}
	t.drop(sh, s)
	sh.mu.Unlock()
}
