package upstream

import (
	"context"
	"log/slog"
	"time"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// maxLogged bounds what the client logs, or names in a NACK, of a text
// the upstream chose (a type URL, a name, a version).
const maxLogged = 256

// cut bounds an upstream's text at maxLogged bytes, at a rune boundary.
func cut(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	s = s[:maxLogged]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// refusalKey is the type a refusal counts against: a subscribed type's
// URL, or "" for every other, so that an upstream inventing types makes
// one entry, not one per type.
func (c *Client) refusalKey(url string) string {
	if _, ok := c.types[url]; ok {
		return url
	}
	return ""
}

// logRefusal logs a refused response: a warning the first time a version
// of the type is refused, at debug when the upstream sends it again (an
// upstream answering each NACK with the same response would otherwise
// fill the log).
func (c *Client) logRefusal(key, url, version string, err error) {
	c.mu.Lock()
	again := c.warned[key] == version
	c.warned[key] = version
	c.mu.Unlock()
	level := slog.LevelWarn
	if again {
		level = slog.LevelDebug
	}
	c.o.Logger.Log(context.Background(), level, "upstream response refused (NACK)", "node", c.o.Node.GetId(), "type", cut(url), "version", cut(version), "err", cut(err.Error()))
}

// nackBackoff is how long the n-th refusal in a row (n > 1) of a type
// waits before its NACK is sent: MinBackoff doubling to MaxBackoff. A
// well-behaved upstream sends the type again only once it is answered,
// so the NACKs pace it.
func (c *Client) nackBackoff(n int) time.Duration {
	d := c.o.MinBackoff
	for i := 2; i < n && d < c.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.o.MaxBackoff)
}

// heldNACK is a NACK waiting out its backoff.
type heldNACK struct {
	req *discoveryv3.DeltaDiscoveryRequest
	at  time.Time
}

// hold keeps a NACK to send after d; a later NACK of the type replaces it
// (only the latest nonce needs an answer) and keeps its time, so that a
// flood of bad responses is answered once per backoff, not once each.
func (s *session) hold(key string, req *discoveryv3.DeltaDiscoveryRequest, d time.Duration) {
	h, ok := s.held[key]
	if !ok {
		h.at = time.Now().Add(d)
	}
	h.req = req
	s.held[key] = h
	s.arm()
}

// arm sets the timer to the earliest held NACK.
func (s *session) arm() {
	var next time.Time
	for _, h := range s.held {
		if next.IsZero() || h.at.Before(next) {
			next = h.at
		}
	}
	s.stopTimer()
	if !next.IsZero() {
		s.timer = time.NewTimer(time.Until(next))
	}
}

// due is the timer's channel, nil (never ready) when nothing is held.
func (s *session) due() <-chan time.Time {
	if s.timer == nil {
		return nil
	}
	return s.timer.C
}

func (s *session) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// flush sends the held NACKs that are due.
func (s *session) flush() error {
	s.timer = nil
	now := time.Now()
	for key, h := range s.held {
		if h.at.After(now) {
			continue
		}
		delete(s.held, key)
		if err := s.send(h.req); err != nil {
			return err
		}
	}
	s.arm()
	return nil
}
