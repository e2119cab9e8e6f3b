package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// XdstpScheme starts a structured resource name (xDS TP1, gRPC A47):
// xdstp://[authority]/{resource type}/{id}?{context parameters}.
const XdstpScheme = "xdstp://"

// XdstpName is an xdstp:// name split into its parts, none decoded.
type XdstpName struct {
	Authority string // may be empty
	Type      string // the message's full name, e.g. envoy.config.cluster.v3.Cluster
	ID        string // one or more segments separated by '/'
	// Params are the context parameters as written, "key=value" each.
	Params []string
	// Directive is what follows '#', without it.
	Directive string
}

// ParseXdstp splits an xdstp:// name. It checks structure only: the
// scheme, a type segment and an id; ok is false when name is not an
// xdstp:// name at all, err set when it is one but malformed.
func ParseXdstp(name string) (n XdstpName, ok bool, err error) {
	rest, ok := strings.CutPrefix(name, XdstpScheme)
	if !ok {
		return n, false, nil
	}
	rest, n.Directive, _ = strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	var path string
	n.Authority, path, _ = strings.Cut(rest, "/")
	n.Type, n.ID, _ = strings.Cut(path, "/")
	switch {
	case n.Type == "":
		return n, true, fmt.Errorf("xdstp:// name %q has no resource type segment (xdstp://authority/type/id)", name)
	case n.ID == "":
		return n, true, fmt.Errorf("xdstp:// name %q has no id after its type %q (xdstp://authority/type/id)", name, n.Type)
	}
	if hasQuery {
		n.Params = strings.Split(query, "&")
	}
	return n, true, nil
}

// paramKey is a context parameter's key.
func paramKey(p string) string {
	k, _, _ := strings.Cut(p, "=")
	return k
}

// javaOrderClash finds two keys of params (sorted by key) that grpc-java
// would put in the other order: it sorts whole "key=value" strings, so a
// key followed by a longer key continuing with a character below '='
// ('-', '.', a digit) comes after it. No order of such a name is canonical
// for every client.
func javaOrderClash(params []string) (string, string) {
	for i, p := range params {
		k := paramKey(p)
		for _, q := range params[i+1:] {
			if l := paramKey(q); strings.HasPrefix(l, k) && len(l) > len(k) && l[len(k)] < '=' {
				return k, l
			}
		}
	}
	return "", ""
}

// xdstpSafe reports whether every character of s is one no client
// percent-encodes or decodes: grpc-go re-encodes a name through net/url and
// Envoy through its own encoder, so a name using any other character may
// reach a client as a different string than the one it asked for.
func xdstpSafe(s, extra string) bool {
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~"+extra, c)
		if !ok {
			return false
		}
	}
	return true
}

// XdstpProblem says why name cannot be the name of a resource of the
// message type typeName, or returns "" (also for a name that is not an
// xdstp:// name). Names are the xDS server's keys: a client finds a
// resource only under the exact name it asks for, and both grpc-go and
// Envoy ask with the context parameters sorted by key, so a resource's
// name must be in that canonical form (X46). A glob ("/*") is a
// collection, not a resource's name, and a processing directive ('#')
// belongs in a reference, not in a name.
func XdstpProblem(name, typeName string) string {
	n, ok, err := ParseXdstp(name)
	switch {
	case !ok:
		return ""
	case err != nil:
		return err.Error()
	case n.Type != typeName:
		return fmt.Sprintf("xdstp:// name %q has type segment %q, but the resource is a %s: name it xdstp://%s/%s/%s, and refer to it by that name", name, n.Type, typeName, n.Authority, typeName, n.ID)
	case n.ID == "*" || strings.HasSuffix(n.ID, "/*"):
		return fmt.Sprintf("xdstp:// name %q is a glob collection, not a resource's name", name)
	case n.Directive != "":
		return fmt.Sprintf("xdstp:// name %q has a processing directive (#%s); a resource's own name carries none", name, n.Directive)
	case !xdstpSafe(n.Authority, ":") || !xdstpSafe(n.ID, "/"):
		return fmt.Sprintf("xdstp:// name %q has characters clients percent-encode in its authority or id; use letters, digits and -._~ (and / between id segments)", name)
	}
	for _, p := range n.Params {
		k, v, _ := strings.Cut(p, "=")
		if k == "" || !xdstpSafe(k, "") || !xdstpSafe(v, "") {
			return fmt.Sprintf("xdstp:// name %q has context parameter %q; want key=value with a non-empty key, both of letters, digits and -._~", name, p)
		}
	}
	sorted := slices.Clone(n.Params)
	slices.SortStableFunc(sorted, func(a, b string) int { return strings.Compare(paramKey(a), paramKey(b)) })
	for i := 1; i < len(sorted); i++ {
		if paramKey(sorted[i]) == paramKey(sorted[i-1]) {
			return fmt.Sprintf("xdstp:// name %q repeats context parameter %q", name, paramKey(sorted[i]))
		}
	}
	if a, b := javaOrderClash(sorted); a != "" {
		return fmt.Sprintf("xdstp:// name %q has context parameter keys %q and %q, which grpc-java orders otherwise than grpc-go and Envoy (it sorts key=value, they sort keys): rename one so neither is the other plus '-', '.' or a digit", name, a, b)
	}
	if !slices.Equal(sorted, n.Params) {
		want := name[:strings.IndexByte(name, '?')] + "?" + strings.Join(sorted, "&")
		return fmt.Sprintf("xdstp:// name %q is not canonical: context parameters must be sorted by key, as clients ask for them (%q)", name, want)
	}
	return ""
}

// CanonicalXdstp returns name with its context parameters sorted by key (X46).
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
// snapshots must hold xdstp:// names in this form too (XdstpProblem
// refuses others).
func CanonicalXdstp(name string) string {
	if !strings.HasPrefix(name, XdstpScheme) {
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
	slices.SortStableFunc(params, func(a, b string) int { return strings.Compare(paramKey(a), paramKey(b)) })
	return name[:q+1] + strings.Join(params, "&") + fragment
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
