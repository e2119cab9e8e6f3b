package upstream

import (
	"context"
	"maps"
	"slices"
	"time"
)

// A resource the upstream sends with a TTL (X41) lives here only as long
// as the upstream refreshes it (sends it again, or a heartbeat of it):
// past its TTL without one it is removed from the state, as a proxy
// talking to the upstream would drop it, so that the relay's proxies lose
// it when the upstream stops refreshing it (an outage, the upstream
// killed), not when the relay stops. The relay heartbeats what it serves
// downstream; what it serves is only what is refreshed here.

// refresh notes that n of url was refreshed at now; mu is held.
func (c *Client) refresh(url, n string, now time.Time) {
	if c.refreshed[url] == nil {
		c.refreshed[url] = map[string]time.Time{}
	}
	c.refreshed[url][n] = now
}

// refreshAll notes a response's refreshes: the resources it sent with a
// TTL, and its heartbeats of those held. A heartbeat of a name not held
// (expired here while the upstream still refreshes it) asks for the
// resource again: the upstream, taking it as held, would never resend
// it. mu is held; it wakes the expiry for the new deadlines.
func (c *Client) refreshAll(url string, add map[string]Resource, beats []string) {
	now := time.Now()
	held := c.state[url]
	fresh := false
	for n, r := range add {
		if h, ok := held[n]; ok && h.TTL > 0 && r.TTL > 0 {
			c.refresh(url, n, now)
			fresh = true
		}
	}
	for _, n := range beats {
		if h, ok := held[n]; ok {
			if h.TTL > 0 {
				c.refresh(url, n, now)
			}
			continue
		}
		if t := c.types[url]; t.subscribed(c.names[url], n, nil) {
			if c.again[url] == nil {
				c.again[url] = map[string]bool{}
			}
			c.again[url][n] = true
			c.poke()
		}
	}
	if fresh {
		select {
		case c.ttlKick <- struct{}{}:
		default:
		}
	}
}

// askAgain adds to sub the names of url to ask for again (refreshAll)
// that are not in it yet; mu is held.
func (c *Client) askAgain(url string, want, sub []string) []string {
	for n := range c.again[url] {
		if !slices.Contains(sub, n) && (c.types[url].Wildcard || wildcard(want) || slices.Contains(want, n)) {
			sub = append(sub, n)
		}
	}
	delete(c.again, url)
	return sub
}

// expireLoop removes what expires, when it expires, until ctx ends, and
// calls OnChange after a removal.
func (c *Client) expireLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		changed, next := c.expire(time.Now())
		if changed && c.o.OnChange != nil {
			c.o.OnChange()
		}
		t.Stop()
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.ttlKick:
		}
	}
}

// expire removes the resources held with a TTL that the upstream has not
// refreshed within it, and reports whether it removed any and when the
// next one is due (zero: none is held).
func (c *Client) expire(now time.Time) (changed bool, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for url, names := range c.refreshed {
		held := c.state[url]
		var gone []string
		for n, at := range names {
			r, ok := held[n]
			if !ok || r.TTL <= 0 {
				delete(names, n) // removed, or sent again without a TTL
				continue
			}
			due := at.Add(r.TTL)
			if !due.After(now) {
				gone = append(gone, n)
				continue
			}
			if next.IsZero() || due.Before(next) {
				next = due
			}
		}
		if len(gone) == 0 {
			continue
		}
		kept := maps.Clone(held)
		for _, n := range gone {
			delete(kept, n)
			delete(names, n)
		}
		c.state[url] = kept
		changed = true
		c.o.Logger.Info("upstream stopped refreshing resources with a TTL: they expired", "node", c.o.Node.GetId(), "type", cut(url), "count", len(gone))
	}
	return changed, next
}
