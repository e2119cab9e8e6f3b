package xds

import (
	"slices"
	"sort"
	"strings"

	"github.com/pylon-xds/pylon/internal/snapshot"
)

// xdstpScheme starts a structured resource name (xDS TP1, gRPC A47):
// xdstp://[authority]/{resource type}/{id/*}?{context parameters}#{directive}.
const xdstpScheme = "xdstp://"

// canonicalName returns name with its context parameters sorted by key (X46).
// xdstp:// names are opaque cache keys, except that two names differing
// only in the order of their context parameters are the same resource (TP1,
// "Normalization"). Responses carry the sorted name, not the order the
// client sent: that is the form real clients match on. grpc-go sorts every
// name it subscribes to and every name it reads back
// (xdsresource.Name.String, applied in its xdsclient's channel.go); Envoy
// does the same (encodeUrn with sort_context_params_ in GrpcMuxImpl and
// WatchMap::watchesInterestedIn); grpc-java subscribes sorted and drops a
// response whose name is not sorted (XdsClient.canonifyResourceName).
// Any other name, and an xdstp:// name with fewer than two parameters, is
// returned as it is, without allocating. Names are the server's keys, so
// snapshots must hold xdstp:// names in this form too
// (snapshot.XdstpProblem refuses others).
func canonicalName(name string) string {
	if !strings.HasPrefix(name, xdstpScheme) {
		return name
	}
	q := strings.IndexByte(name, '?')
	if q < 0 {
		return name
	}
	query, fragment := name[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, fragment = query[:h], query[h:]
	}
	if !strings.Contains(query, "&") || keysSorted(query) {
		// What grpc-go and Envoy send: as it is, without allocating.
		return name
	}
	params := strings.Split(query, "&")
	key := func(p string) string { k, _, _ := strings.Cut(p, "="); return k }
	slices.SortStableFunc(params, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	return name[:q+1] + strings.Join(params, "&") + fragment
}

// canonicalNames applies canonicalName to names, copying the slice only
// when a name changes.
func canonicalNames(names []string) []string {
	var out []string
	for i, n := range names {
		c := canonicalName(n)
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

// canonicalVersions is canonicalNames for initial_resource_versions' keys.
func canonicalVersions(m map[string]string) map[string]string {
	var out map[string]string
	for n := range m {
		if canonicalName(n) != n {
			out = make(map[string]string, len(m))
			break
		}
	}
	if out == nil {
		return m
	}
	for n, v := range m {
		out[canonicalName(n)] = v
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
	if !strings.HasPrefix(name, xdstpScheme) || !strings.Contains(name, "*") {
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

// keysSorted reports whether the parameters of query ("k1=v1&k2=v2...")
// come in key order, walking it without splitting.
func keysSorted(query string) bool {
	prev := ""
	for first := true; ; first = false {
		param, rest, more := strings.Cut(query, "&")
		key, _, _ := strings.Cut(param, "=")
		if !first && key < prev {
			return false
		}
		if !more {
			return true
		}
		prev, query = key, rest
	}
}
