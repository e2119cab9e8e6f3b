package relay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pylon-xds/pylon/internal/fleet"
)

// Route sends the keys a selector takes to upstreams of their own: the
// shard of a Pylon upstream serving those groups (`pylon serve --groups`).
type Route struct {
	Groups fleet.Selector
	Addrs  []string
}

// maxRoutes bounds --upstream-for.
const maxRoutes = 256

// ParseRoutes reads --upstream-for values, "SELECTOR=HOST:PORT[,HOST:PORT]",
// the selector as serve's --groups (names or globs, comma-separated).
func ParseRoutes(values []string) ([]Route, error) {
	if len(values) > maxRoutes {
		return nil, fmt.Errorf("--upstream-for: %d routes; at most %d", len(values), maxRoutes)
	}
	var out []Route
	for i, v := range values {
		sel, addrs, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--upstream-for %q (route %d): want SELECTOR=HOST:PORT[,HOST:PORT], e.g. 'edge-*=pylon-edge:18000'", v, i+1)
		}
		groups, err := fleet.ParseSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("--upstream-for %q (route %d): %w", v, i+1, err)
		}
		r := Route{Groups: groups}
		for _, a := range strings.Split(addrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				r.Addrs = append(r.Addrs, a)
			}
		}
		if len(r.Addrs) == 0 {
			return nil, fmt.Errorf("--upstream-for %q (route %d): names no upstream after =", v, i+1)
		}
		out = append(out, r)
	}
	return out, nil
}

// upstreamsOf are the upstreams of the key named: those of the first route
// whose selector takes it, else the default ones.
func (r *Relay) upstreamsOf(key string) []string {
	for _, rt := range r.o.Routes {
		if rt.Groups.Serves(key) {
			return rt.Addrs
		}
	}
	return r.o.Upstreams
}

// known are every upstream the relay names: a refusal pointing at one of
// them is retried there; at another, never (a relay dials only what its
// operator listed).
func (r *Relay) known() []string {
	all := slices.Clone(r.o.Upstreams)
	for _, rt := range r.o.Routes {
		all = append(all, rt.Addrs...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}
