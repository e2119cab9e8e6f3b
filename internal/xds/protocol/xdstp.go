package protocol

import (
	"slices"
	"sort"
	"strings"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// CanonicalNames applies snapshot.CanonicalXdstp to names (X46), copying the slice only
// when a name changes.
func CanonicalNames(names []string) []string {
	var out []string
	for i, n := range names {
		c := snapshot.CanonicalXdstp(n)
		if c != n && out == nil {
			out = slices.Clone(names)
		}
		if out != nil {
			out[i] = c
		}
	}
	if out == nil {
		return names
	}
	return out
}

// CanonicalVersions is CanonicalNames for initial_resource_versions' keys.
func CanonicalVersions(m map[string]string) map[string]string {
	var out map[string]string
	for n := range m {
		if snapshot.CanonicalXdstp(n) != n {
			out = make(map[string]string, len(m))
			break
		}
	}
	if out == nil {
		return m
	}
	for n, v := range m {
		out[snapshot.CanonicalXdstp(n)] = v
	}
	return out
}

// collectionType reports whether Pylon serves xdstp:// glob collections of
// the message type t: Listener and Cluster, the types TP1 and Envoy fetch
// as collections.
func collectionType(t string) bool {
	return t == "envoy.config.listener.v3.Listener" || t == "envoy.config.cluster.v3.Cluster"
}

// collection is a glob subscription (TP1 "glob collections"):
// xdstp://authority/type/path/* names every resource of the type whose
// name is xdstp://authority/type/path/{id}, one segment deeper, with the
// same context parameters.
type collection struct {
	prefix string // the glob without its "*" and parameters
	query  string // the canonical context parameters, "" for none
}

// parseCollection reads name as a glob collection; ok is false for any
// other name. name is canonical (canonicalName), so its parameters are
// those a member's name carries.
func parseCollection(name string) (c collection, ok bool) {
	if !strings.HasPrefix(name, snapshot.XdstpScheme) || !strings.Contains(name, "*") {
		return c, false
	}
	n, ok, err := snapshot.ParseXdstp(name)
	if !ok || err != nil || n.Directive != "" || !collectionType(n.Type) {
		return c, false
	}
	if n.ID != "*" && !strings.HasSuffix(n.ID, "/*") {
		return c, false
	}
	base, query, _ := strings.Cut(name, "?")
	return collection{prefix: strings.TrimSuffix(base, "*"), query: query}, true
}

// contains reports whether the resource named name is in the collection.
func (c collection) contains(name string) bool {
	rest, ok := strings.CutPrefix(name, c.prefix)
	if !ok {
		return false
	}
	id, query, _ := strings.Cut(rest, "?")
	return id != "" && id != "*" && !strings.ContainsAny(id, "/#") && query == c.query
}

// each calls fn for every member of the collection in set. Set names are
// sorted, so the members are among the names from the prefix on: the scan
// is as long as the names sharing the prefix, not the whole set.
func (c collection) each(set *snapshot.Set, fn func(string)) {
	names := set.Names()
	for i := sort.SearchStrings(names, c.prefix); i < len(names) && strings.HasPrefix(names[i], c.prefix); i++ {
		if c.contains(names[i]) {
			fn(names[i])
		}
	}
}
