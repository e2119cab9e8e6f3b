package route

//lint:file-ignore SA1019 the older header_match_specifier fields (exact_match, prefix_match, ...) are still valid Envoy config, and what Pylon writes for gRPC clients older than gRFC A63 (translate.grpcHeaderMatch): the engine must read them

import (
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func req(t *testing.T, line string, headers ...string) Request {
	t.Helper()
	r, err := ParseRequest(line, headers)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sm(s *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: s}
}

// Each StringMatcher pattern, with and without ignore_case, and a regex
// that must match the whole value.
func TestStringMatch(t *testing.T) {
	m := newMatcher(&notes{}, false, nil)
	cases := []struct {
		sm    *matcherv3.StringMatcher
		value string
		want  bool
	}{
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "abc"}}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "abc"}}, "ABC", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "abc"}, IgnoreCase: true}, "ABC", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "ab"}}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "AB"}, IgnoreCase: true}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "bc"}}, "abc", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "bc"}}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "ab"}}, "abc", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "b"}}, "abc", true},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "B"}}, "abc", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "a.c"}}}, "abc", true},
		// Full match only: no partial match at either end.
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "b"}}}, "abc", false},
		{&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "a|abc"}}}, "abc", true},
	}
	for _, c := range cases {
		got, err := m.stringMatch(c.sm, c.value)
		if err != nil || got != c.want {
			t.Errorf("%v on %q: %v, %v; want %v", c.sm, c.value, got, err, c.want)
		}
	}
	if _, err := m.stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}, "x"); err == nil {
		t.Error("a regex that does not compile: no error")
	}
	long := strings.Repeat("a", maxRegexBytes+1)
	if _, err := m.fullMatch(long, "a"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a regex over the limit: %v", err)
	}
}

// Header matchers: every specifier, invert_match, a missing header (only
// present_match: false, or inverted true, matches it),
// treat_missing_header_as_empty, pseudo headers, repeated headers joined.
func TestHeaderMatch(t *testing.T) {
	m := newMatcher(&notes{}, false, nil)
	r := req(t, "POST https://shop.example.com:8443/cart?x=1", "x-a: 15", "x-b: one", "x-b: two", "x-empty:")
	cases := []struct {
		name string
		h    *routev3.HeaderMatcher
		want bool
	}{
		{"exact", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "15"}}, true},
		{"exact other", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "1"}}, false},
		{"name any case", &routev3.HeaderMatcher{Name: "X-A", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "15"}}, true},
		{"range in", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 10, End: 16}}}, true},
		{"range end excluded", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 10, End: 15}}}, false},
		{"range not a number", &routev3.HeaderMatcher{Name: "x-b", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 0, End: 100}}}, false},
		{"prefix", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "1"}}, true},
		{"suffix", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_SuffixMatch{SuffixMatch: "5"}}, true},
		{"contains", &routev3.HeaderMatcher{Name: "x-b", HeaderMatchSpecifier: &routev3.HeaderMatcher_ContainsMatch{ContainsMatch: "e,t"}}, true},
		{"joined values", &routev3.HeaderMatcher{Name: "x-b", HeaderMatchSpecifier: sm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "one,two"}})}, true},
		{"regex", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: `\d+`}}}, true},
		{"inverted", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "15"}, InvertMatch: true}, false},
		{"present", &routev3.HeaderMatcher{Name: "x-empty", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}, true},
		{"present, missing", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}, false},
		{"absent, missing", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}, true},
		{"absent, present", &routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}, false},
		{"present inverted, missing", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}, InvertMatch: true}, true},
		{"exact inverted, missing", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "1"}, InvertMatch: true}, false},
		{"missing as empty, inverted", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "1"}, InvertMatch: true, TreatMissingHeaderAsEmpty: true}, true},
		{"missing as empty, exact empty", &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: sm(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: ""}}), TreatMissingHeaderAsEmpty: true}, true},
		{":method", &routev3.HeaderMatcher{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "POST"}}, true},
		{":authority with port", &routev3.HeaderMatcher{Name: ":authority", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "shop.example.com:8443"}}, true},
		{":path with query", &routev3.HeaderMatcher{Name: ":path", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "/cart?x=1"}}, true},
		{":scheme", &routev3.HeaderMatcher{Name: ":scheme", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: "https"}}, true},
	}
	for _, c := range cases {
		got, err := m.headerMatch(c.h, &r)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// gRPC never matches binary metadata (gRFC A28).
func TestHeaderMatchGRPCBinary(t *testing.T) {
	r := req(t, "GRPC xds:///greeter/pkg.S/M", "x-id-bin: AAEC")
	h := &routev3.HeaderMatcher{Name: "x-id-bin", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}
	if ok, _ := newMatcher(&notes{}, true, nil).headerMatch(h, &r); ok {
		t.Error("gRPC matched a -bin header")
	}
	if ok, _ := newMatcher(&notes{}, false, nil).headerMatch(h, &r); !ok {
		t.Error("Envoy did not match a present -bin header")
	}
}

// Path specifiers: prefix sees the query, path and regex do not;
// case_sensitive applies to prefix and path; path_separated_prefix needs a
// "/" or the end after the prefix.
func TestPathMatch(t *testing.T) {
	m := newMatcher(&notes{}, false, nil)
	insensitive := wrapperspb.Bool(false)
	cases := []struct {
		rm   *routev3.RouteMatch
		path string
		want bool
	}{
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/a?x"}}, "/a?x=1", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/A"}}, "/a", false},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/A"}, CaseSensitive: insensitive}, "/a/b", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}}, "/", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/a"}}, "/a?x=1", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/a"}}, "/a/", false},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/A"}, CaseSensitive: insensitive}, "/a", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/[0-9]+"}}}, "/42?x", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/[0-9]+"}}}, "/42/x", false},
		// case_sensitive does not apply to regexes.
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/A"}}, CaseSensitive: insensitive}, "/a", false},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/api", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/api/x", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/api?x", true},
		{&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, "/apis", false},
	}
	for _, c := range cases {
		r := req(t, "GET http://x"+c.path)
		got, err := m.routeMatch(c.rm, &r)
		if err != nil || got != c.want {
			t.Errorf("%v on %q: %v, %v; want %v", c.rm, c.path, got, err, c.want)
		}
	}
}

// Query parameters: present, the first value, decoded.
func TestQueryMatch(t *testing.T) {
	m := newMatcher(&notes{}, false, nil)
	r := req(t, "GET http://x/?a=1&a=2&b=x%20y&flag")
	exact := func(name, v string) *routev3.QueryParameterMatcher {
		return &routev3.QueryParameterMatcher{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}}
	}
	present := func(name string, p bool) *routev3.QueryParameterMatcher {
		return &routev3.QueryParameterMatcher{Name: name, QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: p}}
	}
	for _, c := range []struct {
		q    *routev3.QueryParameterMatcher
		want bool
	}{
		{exact("a", "1"), true}, {exact("a", "2"), false}, {exact("b", "x y"), true},
		{present("flag", true), true}, {present("none", true), false}, {present("none", false), true}, {exact("none", ""), false},
	} {
		if got, err := m.queryMatch(c.q, &r); err != nil || got != c.want {
			t.Errorf("%v: %v, %v; want %v", c.q, got, err, c.want)
		}
	}
}

// Virtual host order: exact, suffix wildcards longest first, prefix
// wildcards longest first, then *; a wildcard never matches empty.
func TestFindVirtualHost(t *testing.T) {
	vh := func(name string, domains ...string) *routev3.VirtualHost {
		return &routev3.VirtualHost{Name: name, Domains: domains}
	}
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		vh("any", "*"), vh("pre", "api.*"), vh("longpre", "api.v1.*"), vh("suf", "*.com"), vh("longsuf", "*.example.com"), vh("exact", "api.example.com"),
	}}
	for host, want := range map[string]string{
		"api.example.com": "exact", "API.EXAMPLE.COM": "exact", "www.example.com": "longsuf", "example.com": "suf",
		"api.example.org": "pre", "api.v1.example.org": "longpre", "api.": "any", ".com": "any", "other": "any",
	} {
		got, _ := findVirtualHost(rc, host)
		if got.GetName() != want {
			t.Errorf("%s: %q, want %q", host, got.GetName(), want)
		}
	}
	if got, _ := findVirtualHost(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh("a", "a.com")}}, "b.com"); got != nil {
		t.Errorf("no domain matches, got %q", got.GetName())
	}
}

func TestServerNameMatch(t *testing.T) {
	names := []string{"*.example.com", "*.api.example.com", "shop.example.com"}
	for sni, want := range map[string]string{
		"shop.example.com": "shop.example.com", "a.api.example.com": "*.api.example.com", "a.b.example.com": "*.example.com",
		"example.com": "", "": "",
	} {
		if _, got := serverNameMatch(names, sni); got != want {
			t.Errorf("%q: %q, want %q", sni, got, want)
		}
	}
}

func TestParseRequest(t *testing.T) {
	r := req(t, "post https://Shop.example.com:8443/a/b?c=d", "X-Canary: 1", "host: other")
	if r.Method != "POST" || r.Scheme != "https" || r.Authority != "other" || r.Path != "/a/b?c=d" || r.Headers["x-canary"][0] != "1" {
		t.Errorf("%+v", r)
	}
	g := req(t, "GRPC xds:///greeter.ns:8080/pkg.Svc/Method")
	if !g.GRPC || g.Authority != "greeter.ns:8080" || g.Path != "/pkg.Svc/Method" {
		t.Errorf("%+v", g)
	}
	if r := req(t, "https://x"); r.Method != "GET" || r.Path != "/" {
		t.Errorf("%+v", r)
	}
	for _, bad := range []string{"GET ftp://x/", "GET /path", "GRPC xds:///greeter", "GRPC xds:///greeter/Method", "GET " + strings.Repeat("a", MaxURLBytes)} {
		if _, err := ParseRequest(bad, nil); err == nil {
			t.Errorf("%.40q: no error", bad)
		}
	}
	if _, err := ParseRequest("GET http://x/", []string{"no colon"}); err == nil {
		t.Error("a header without a colon: no error")
	}
	many := make([]string, MaxHeaders+1)
	for i := range many {
		many[i] = "x: y"
	}
	if _, err := ParseRequest("GET http://x/", many); err == nil {
		t.Error("too many headers: no error")
	}
}

// Every matcher on the same Resources compiles a pattern once: route tests
// explain hundreds of requests against one snapshot.
func TestRegexesCompiledOncePerResources(t *testing.T) {
	cache := &regexes{}
	a, b := newMatcher(&notes{}, false, cache), newMatcher(&notes{}, true, cache)
	for _, m := range []*matcher{a, b} {
		if ok, err := m.fullMatch(`/api/v[0-9]+`, "/api/v2"); !ok || err != nil {
			t.Fatalf("fullMatch: %v %v", ok, err)
		}
	}
	re1, _ := cache.compile(`/api/v[0-9]+`)
	re2, _ := cache.compile(`/api/v[0-9]+`)
	if len(cache.m) != 1 || re1 != re2 {
		t.Fatalf("patterns compiled: %d, same value twice: %v; want one, shared", len(cache.m), re1 == re2)
	}
	if FromSnapshot(xdstest.Snapshot(t, xdstype.New(), xdstest.Cluster("a"), xdstest.Endpoints("a", 1))).regex == nil {
		t.Fatal("resources from a snapshot carry no shared regex cache")
	}
}
