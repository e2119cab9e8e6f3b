package status

import "time"

// Forget drops stream id at once, open or closed, without keeping it among
// the recently closed: for a stream that was one REST poll, whose end is
// not a proxy leaving (its next poll comes within a second or so). Kept,
// a fleet of polling proxies would push every real disconnect out of the
// bounded list of closed streams within seconds.
func (t *Tracker) Forget(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		return
	}
	if s.gone == nil {
		t.end(s, time.Time{})
	}
	// A closed one's id left in t.gone goes with the next prune.
	delete(t.streams, id)
}
