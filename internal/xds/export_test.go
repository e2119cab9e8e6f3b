package xds

import "time"

// SetDrainClock makes Drain's schedule fire on the channels clock returns
// (one per connection, for its offset from the drain's start) instead of
// at those times, so that tests step through a drain exactly.
func SetDrainClock(s *Server, clock func(offset time.Duration) <-chan time.Time) {
	s.drainClock = clock
}
