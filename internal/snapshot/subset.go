package snapshot

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Names is a set of resource names per type URL.
type Names map[string]map[string]bool

// Add puts name of typeURL in the set.
func (n Names) Add(typeURL, name string) {
	if n[typeURL] == nil {
		n[typeURL] = map[string]bool{}
	}
	n[typeURL][name] = true
}

// Closure returns roots and everything they name, transitively: a listener
// brings its routes and secrets, a route its clusters, a cluster its
// assignment and secrets, a route configuration with vhds its VirtualHosts.
func Closure(s *Snapshot, roots Names) Names {
	out := Names{}
	type item struct{ typeURL, name string }
	var queue []item
	for t, names := range roots {
		for n := range names {
			queue = append(queue, item{t, n})
		}
	}
	for len(queue) > 0 {
		it := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if out[it.typeURL][it.name] {
			continue
		}
		r := s.Set(it.typeURL).Get(it.name)
		if r == nil {
			continue
		}
		out.Add(it.typeURL, it.name)
		for _, ref := range r.Refs {
			queue = append(queue, item{ref.TypeURL, ref.Name})
		}
		if rc, ok := r.Message.(*routev3.RouteConfiguration); ok && rc.GetVhds() != nil {
			// Nothing names a virtual host served by VHDS: its route
			// configuration brings those of its namespace, which its
			// clients ask for.
			for _, n := range VirtualHostsOf(s.Set(xdstype.VirtualHostURL), it.name) {
				queue = append(queue, item{xdstype.VirtualHostURL, n})
			}
		}
	}
	return out
}

// Subset returns a snapshot of the resources of s named in keep. The
// resources, and so their encodings, are shared with s: a group's snapshot
// costs an index, not a second marshalling.
func Subset(reg *xdstype.Registry, s *Snapshot, keep Names) *Snapshot {
	byType := map[string]map[string]*Resource{}
	for t, names := range keep {
		set := s.Set(t)
		for n := range names {
			if r := set.Get(n); r != nil {
				if byType[t] == nil {
					byType[t] = map[string]*Resource{}
				}
				byType[t][n] = r
			}
		}
	}
	return newSnapshot(reg, byType)
}

// Without returns s less the named resources of typeURL (names nil: less
// every resource of the type). Every other type's *Set is s's own, shared:
// only the one set is rebuilt, and whatever is keyed on a set (the xds
// server's shared planning) is shared too between s and the result. Versions
// are those a snapshot built from the remaining resources would have.
func Without(s *Snapshot, typeURL string, names []string) *Snapshot {
	old := s.Set(typeURL)
	if old == nil {
		return s
	}
	byName := make(map[string]*Resource, len(old.byName))
	if names != nil {
		drop := make(map[string]bool, len(names))
		for _, n := range names {
			drop[n] = true
		}
		for n, r := range old.byName {
			if !drop[n] {
				byName[n] = r
			}
		}
	}
	return s.withSet(newSet(old.typ, byName))
}
