package xds

import (
	"slices"
	"strings"
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
// (xdsresource.Name.String, applied in its xdsclient's channel.go), and
// Envoy does the same (encodeUrn with sort_context_params_ in GrpcMuxImpl
// and WatchMap::watchesInterestedIn). Any other name, and an xdstp:// name
// with fewer than two parameters, is returned as it is, without
// allocating. Names are the server's keys, so snapshots must hold xdstp://
// names in this form too.
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
	if !strings.Contains(query, "&") {
		return name
	}
	params := strings.Split(query, "&")
	key := func(p string) string { k, _, _ := strings.Cut(p, "="); return k }
	sorted := slices.IsSortedFunc(params, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	if sorted {
		return name
	}
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
