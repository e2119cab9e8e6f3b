package route

//lint:file-ignore SA1019 the older header_match_specifier fields (exact_match, prefix_match, ...) are still valid Envoy config, and what Pylon writes for gRPC clients older than gRFC A63 (translate.grpcHeaderMatch): the engine must read them

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// maxRegexBytes bounds a pattern the engine compiles. Go's regexp is RE2:
// matching is linear in the input, so only the pattern needs a bound.
const maxRegexBytes = 32 << 10

// matcher evaluates Envoy matchers against one request, with the compiled
// regexes of its Resources, and collects what it could not simulate.
type matcher struct {
	regex *regexes
	notes *notes
	// grpc: the request is a proxyless gRPC call (matched as grpc-go does
	// where that differs from Envoy).
	grpc bool
}

// newMatcher returns a matcher compiling into cache (nil: a cache of its
// own).
func newMatcher(n *notes, grpc bool, cache *regexes) *matcher {
	if cache == nil {
		cache = &regexes{}
	}
	return &matcher{regex: cache, notes: n, grpc: grpc}
}

// regexes are compiled patterns kept for every request explained against
// the same Resources: route tests run hundreds of requests on one
// snapshot, and compiling each route's regex per request made a thousand
// regex-heavy tests take minutes per config change.
type regexes struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

// compile returns pattern compiled to match whole strings.
func (c *regexes) compile(pattern string) (*regexp.Regexp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if re, ok := c.m[pattern]; ok {
		return re, nil
	}
	if len(pattern) > maxRegexBytes {
		return nil, fmt.Errorf("regex of %d bytes, over the %d byte limit", len(pattern), maxRegexBytes)
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %v", short(pattern), err)
	}
	if c.m == nil {
		c.m = map[string]*regexp.Regexp{}
	}
	c.m[pattern] = re
	return re, nil
}

// fullMatch reports whether pattern (RE2, as Envoy's safe_regex and
// grpc-go use it) matches all of v. A pattern Go cannot compile is an
// error: Envoy would have refused the config.
func (m *matcher) fullMatch(pattern, v string) (bool, error) {
	re, err := m.regex.compile(pattern)
	if err != nil {
		return false, err
	}
	return re.MatchString(v), nil
}

// stringMatch applies a StringMatcher (type.matcher.v3) to v.
func (m *matcher) stringMatch(sm *matcherv3.StringMatcher, v string) (bool, error) {
	ic := sm.GetIgnoreCase()
	fold := func(s string) string {
		if ic {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(v) == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(v), fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(v), fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(v), fold(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		// ignore_case has no effect on safe_regex (Envoy's documentation).
		return m.fullMatch(p.SafeRegex.GetRegex(), v)
	case *matcherv3.StringMatcher_Custom:
		m.notes.add("custom string matcher %q (treated as not matching)", p.Custom.GetName())
		return false, nil
	}
	return false, fmt.Errorf("a string matcher without a pattern")
}

// headerMatch applies one HeaderMatcher as Envoy does: a header that
// appears several times is matched as its values joined with ","; a
// missing header matches only present_match: false (or, inverted,
// present_match: true), unless treat_missing_header_as_empty makes it "".
func (m *matcher) headerMatch(h *routev3.HeaderMatcher, r *Request) (bool, error) {
	v, present := r.header(strings.ToLower(h.GetName()))
	if m.grpc && strings.HasSuffix(strings.ToLower(h.GetName()), "-bin") {
		// gRFC A28: binary metadata is never matched.
		present = false
	}
	pm, isPresent := h.GetHeaderMatchSpecifier().(*routev3.HeaderMatcher_PresentMatch)
	if !present && !h.GetTreatMissingHeaderAsEmpty() {
		if isPresent {
			return (!pm.PresentMatch) != h.GetInvertMatch(), nil
		}
		return false, nil
	}
	ok, err := m.headerValue(h, v, present)
	if err != nil {
		return false, err
	}
	return ok != h.GetInvertMatch(), nil
}

// headerValue applies a header matcher's specifier to a present value.
func (m *matcher) headerValue(h *routev3.HeaderMatcher, v string, present bool) (bool, error) {
	if sm := legacyString(h); sm != nil {
		return m.stringMatch(sm, v)
	}
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_RangeMatch:
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= s.RangeMatch.GetStart() && n < s.RangeMatch.GetEnd(), nil
	case *routev3.HeaderMatcher_PresentMatch:
		return present == s.PresentMatch, nil
	case *routev3.HeaderMatcher_StringMatch:
		return m.stringMatch(s.StringMatch, v)
	case nil:
		// No specifier: Envoy matches any present header.
		return present, nil
	}
	return false, fmt.Errorf("header matcher %q: unknown specifier", h.GetName())
}

// legacyString is the string matcher a header matcher's older specifier
// (exact_match, prefix_match, suffix_match, contains_match,
// safe_regex_match) means, case-sensitive as Envoy applies them, or nil for
// the others.
func legacyString(h *routev3.HeaderMatcher) *matcherv3.StringMatcher {
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_ExactMatch:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s.ExactMatch}}
	case *routev3.HeaderMatcher_PrefixMatch:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s.PrefixMatch}}
	case *routev3.HeaderMatcher_SuffixMatch:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: s.SuffixMatch}}
	case *routev3.HeaderMatcher_ContainsMatch:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: s.ContainsMatch}}
	case *routev3.HeaderMatcher_SafeRegexMatch:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: s.SafeRegexMatch}}
	}
	return nil
}

// queryMatch applies a query parameter matcher to the first value of the
// parameter, as Envoy does.
func (m *matcher) queryMatch(q *routev3.QueryParameterMatcher, r *Request) (bool, error) {
	vals, ok := r.query()[q.GetName()]
	switch s := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		return ok == s.PresentMatch, nil
	case *routev3.QueryParameterMatcher_StringMatch:
		if !ok || len(vals) == 0 {
			return false, nil
		}
		return m.stringMatch(s.StringMatch, vals[0])
	}
	// Neither: Envoy requires the parameter to be present.
	return ok, nil
}

// pathMatch applies the route's path specifier. prefix compares with the
// whole :path (query string included), path, safe_regex and
// path_separated_prefix with the path alone, as Envoy's documentation says.
func (m *matcher) pathMatch(rm *routev3.RouteMatch, r *Request) (bool, error) {
	cs := rm.GetCaseSensitive() == nil || rm.GetCaseSensitive().GetValue()
	eq := func(a, b string) bool { return a == b || (!cs && strings.EqualFold(a, b)) }
	hasPrefix := func(s, p string) bool { return len(s) >= len(p) && eq(s[:len(p)], p) }
	switch p := rm.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return hasPrefix(r.Path, p.Prefix), nil
	case *routev3.RouteMatch_Path:
		return eq(r.pathOnly(), p.Path), nil
	case *routev3.RouteMatch_SafeRegex:
		return m.fullMatch(p.SafeRegex.GetRegex(), r.pathOnly())
	case *routev3.RouteMatch_PathSeparatedPrefix:
		path := r.pathOnly()
		if !hasPrefix(path, p.PathSeparatedPrefix) {
			return false, nil
		}
		return len(path) == len(p.PathSeparatedPrefix) || path[len(p.PathSeparatedPrefix)] == '/', nil
	case *routev3.RouteMatch_ConnectMatcher_:
		return r.Method == "CONNECT", nil
	case *routev3.RouteMatch_PathMatchPolicy:
		m.notes.add("path_match_policy %q (treated as not matching)", p.PathMatchPolicy.GetName())
		return false, nil
	}
	return false, fmt.Errorf("a route match without a path specifier")
}

// routeMatch applies a whole RouteMatch: path, headers, query parameters
// and the options it can simulate; the rest is noted and treated as
// matching (runtime_fraction: its default is what a fresh proxy uses, but
// the draw is random) or as Envoy would without the data (dynamic
// metadata, filter state: not matching).
func (m *matcher) routeMatch(rm *routev3.RouteMatch, r *Request) (bool, error) {
	ok, err := m.pathMatch(rm, r)
	if !ok || err != nil {
		return false, err
	}
	for _, h := range rm.GetHeaders() {
		if ok, err := m.headerMatch(h, r); !ok || err != nil {
			return false, err
		}
	}
	for _, q := range rm.GetQueryParameters() {
		if ok, err := m.queryMatch(q, r); !ok || err != nil {
			return false, err
		}
	}
	if rm.GetGrpc() != nil {
		ct, _ := r.header("content-type")
		if !r.GRPC && !strings.HasPrefix(ct, "application/grpc") {
			return false, nil
		}
	}
	return m.unsimulated(rm), nil
}

// unsimulated notes the route match options the engine does not model and
// says whether the route is taken anyway.
func (m *matcher) unsimulated(rm *routev3.RouteMatch) bool {
	if rf := rm.GetRuntimeFraction(); rf != nil {
		d := rf.GetDefaultValue()
		m.notes.add("runtime_fraction (default %d/%s of requests; treated as matching)", d.GetNumerator(), d.GetDenominator())
	}
	if len(rm.GetCookies()) > 0 {
		m.notes.add("cookie matchers (treated as matching)")
	}
	if rm.GetTlsContext() != nil {
		m.notes.add("tls_context match (treated as matching)")
	}
	if len(rm.GetDynamicMetadata()) > 0 || len(rm.GetFilterState()) > 0 {
		m.notes.add("dynamic_metadata / filter_state matchers (treated as not matching: no filter set them)")
		return false
	}
	return true
}

// notes is an ordered set of "not simulated" remarks.
type notes struct {
	list []string
	seen map[string]bool
}

// maxNotes bounds the remarks one result carries.
const maxNotes = 32

func (n *notes) add(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	if n.seen[s] || len(n.list) >= maxNotes {
		return
	}
	n.seen[s] = true
	n.list = append(n.list, s)
}
