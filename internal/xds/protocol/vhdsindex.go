package protocol

import (
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// vhdsIndex finds, per route configuration, the virtual host serving a
// host as Envoy's findVirtualHost does, in map lookups rather than a walk
// of every domain: built once per content of the virtual hosts and route
// configurations (ContentAt) and shared by every stream, so that a client
// holding thousands of aliases costs a lookup per alias, not a scan of
// the namespace each.
type vhdsIndex struct {
	byRC map[string]*vhdsNamespace
}

// vhdsNamespace is one route configuration's VHDS virtual hosts by
// lowercased domain: exact, suffix wildcards ("*.example.com", by the
// suffix after "*") and prefix wildcards ("foo.*", by the prefix) by
// length, longest first, and "*".
type vhdsNamespace struct {
	ignorePort bool
	exact      map[string]*snapshot.Resource
	suffix     map[int]map[string]*snapshot.Resource
	suffixLens []int // descending
	prefix     map[int]map[string]*snapshot.Resource
	prefixLens []int // descending
	star       *snapshot.Resource
}

func newVHDSIndex(set, routes *snapshot.Set) *vhdsIndex {
	idx := &vhdsIndex{byRC: map[string]*vhdsNamespace{}}
	for _, n := range set.Names() {
		rc, _, ok := snapshot.VirtualHostNamespace(n)
		if !ok {
			continue
		}
		ns := idx.byRC[rc]
		if ns == nil {
			ns = &vhdsNamespace{exact: map[string]*snapshot.Resource{}, suffix: map[int]map[string]*snapshot.Resource{}, prefix: map[int]map[string]*snapshot.Resource{}}
			if r := routes.Get(rc); r != nil {
				cfg, _ := r.Message.(*routev3.RouteConfiguration)
				ns.ignorePort = cfg.GetIgnorePortInHostMatching()
			}
			idx.byRC[rc] = ns
		}
		r := set.Get(n)
		vh, _ := r.Message.(*routev3.VirtualHost)
		for _, d := range vh.GetDomains() {
			ns.add(snapshot.ASCIILower(d), r)
		}
	}
	for _, ns := range idx.byRC {
		ns.suffixLens = descendingKeys(ns.suffix)
		ns.prefixLens = descendingKeys(ns.prefix)
	}
	return idx
}

// add enters domain d (lowercased), served by r. The config refuses a
// domain served twice in one route configuration, so no entry is
// overwritten.
func (ns *vhdsNamespace) add(d string, r *snapshot.Resource) {
	switch {
	case d == "*":
		ns.star = r
	case len(d) > 1 && d[0] == '*':
		byLen(ns.suffix, len(d)-1)[d[1:]] = r
	case len(d) > 1 && d[len(d)-1] == '*':
		byLen(ns.prefix, len(d)-1)[d[:len(d)-1]] = r
	default:
		ns.exact[d] = r
	}
}

func byLen(m map[int]map[string]*snapshot.Resource, n int) map[string]*snapshot.Resource {
	if m[n] == nil {
		m[n] = map[string]*snapshot.Resource{}
	}
	return m[n]
}

func descendingKeys(m map[int]map[string]*snapshot.Resource) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	return keys
}

// resolve returns the virtual host of route configuration rc serving
// host, nil for none: an exact domain, else the longest suffix wildcard,
// else the longest prefix wildcard, else "*"; a wildcard never matches an
// empty part.
func (idx *vhdsIndex) resolve(rc, host string) *snapshot.Resource {
	ns := idx.byRC[rc]
	if ns == nil {
		return nil
	}
	if ns.ignorePort {
		host = withoutPort(host)
	}
	host = snapshot.ASCIILower(host)
	if r := ns.exact[host]; r != nil {
		return r
	}
	for _, n := range ns.suffixLens {
		if len(host) > n {
			if r := ns.suffix[n][host[len(host)-n:]]; r != nil {
				return r
			}
		}
	}
	for _, n := range ns.prefixLens {
		if len(host) > n {
			if r := ns.prefix[n][host[:n]]; r != nil {
				return r
			}
		}
	}
	return ns.star
}
