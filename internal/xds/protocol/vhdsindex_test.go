package protocol

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// vhdsSnapshot builds route configuration rc (with VHDS) and the virtual
// hosts, whose routes answer directly (no cluster to name).
func vhdsSnapshot(t testing.TB, rc *routev3.RouteConfiguration, vhosts ...*routev3.VirtualHost) *snapshot.Snapshot {
	t.Helper()
	reg := xdstype.New()
	in := []xdstype.Resource{{Type: reg.Lookup(xdstype.RouteURL), Name: rc.GetName(), Message: rc}}
	for _, vh := range vhosts {
		in = append(in, xdstype.Resource{Type: reg.Lookup(xdstype.VirtualHostURL), Name: vh.GetName(), Message: proto.Message(vh)})
	}
	snap, err := snapshot.Build(reg, in)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func directVHost(name string, domains ...string) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: []*routev3.Route{{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}},
	}}}
}

// The index picks a virtual host as Envoy's findVirtualHost does, whatever
// the order of the virtual hosts' names: an exact domain, else the longest
// suffix wildcard, else the longest prefix wildcard, else "*"; a wildcard
// never matches an empty part; case folds for A-Z only; the port counts
// unless ignore_port_in_host_matching, and is then cut as Envoy cuts it.
func TestVHDSIndexMatchesLikeEnvoy(t *testing.T) {
	for _, ignorePort := range []bool{false, true} {
		rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{directVHost("inline", "inline.example.com")},
			Vhds:                     &routev3.Vhds{ConfigSource: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}},
			IgnorePortInHostMatching: ignorePort}
		// Names sort against the right answer: "a-..." before "z-...".
		snap := vhdsSnapshot(t, rc,
			directVHost("rc/z-exact", "API.example.com"),
			directVHost("rc/a-short-suffix", "*.example.com"),
			directVHost("rc/m-long-suffix", "*.api2.example.com"),
			directVHost("rc/b-short-prefix", "shop.*"),
			directVHost("rc/y-long-prefix", "shop.eu.*"),
			directVHost("rc/c-star", "*"),
			directVHost("rc/d-port", "ported.example.com:8080"),
		)
		idx := newVHDSIndex(snap.Set(xdstype.VirtualHostURL), snap.Set(xdstype.RouteURL))
		cases := map[string]string{
			"api.example.com":    "rc/z-exact",
			"Api.Example.COM":    "rc/z-exact",
			"x.api2.example.com": "rc/m-long-suffix",
			"api2.example.com":   "rc/a-short-suffix", // "*.api2..." needs a non-empty part
			"other.example.com":  "rc/a-short-suffix",
			"shop.eu.x":          "rc/y-long-prefix",
			"shop.eu.":           "rc/b-short-prefix", // "shop.eu.*" needs a non-empty part
			"shop.us":            "rc/b-short-prefix",
			"shop.example.com":   "rc/a-short-suffix", // a suffix wildcard before a prefix one
			"nothing.else":       "rc/c-star",
			"\u212a.example.com": "rc/a-short-suffix", // the Kelvin sign is not "k"
		}
		if ignorePort {
			cases["api.example.com:8443"] = "rc/z-exact"
			cases["api.example.com:"] = "rc/z-exact" // Envoy cuts from the last ':'
			cases["[::1]:80"] = "rc/c-star"
			cases["ported.example.com:80"] = "rc/a-short-suffix" // the port cut, "*.example.com"
		} else {
			// The port is part of the host: only a domain with it matches.
			cases["ported.example.com:8080"] = "rc/d-port"
			cases["ported.example.com:80"] = "rc/c-star"
			cases["api.example.com:8443"] = "rc/c-star"
		}
		for host, want := range cases {
			got := ""
			if r := idx.resolve("rc", host); r != nil {
				got = r.Name
			}
			if got != want {
				t.Errorf("ignore port %v: %q resolves to %q, want %q", ignorePort, host, got, want)
			}
		}
		if r := idx.resolve("other-rc", "api.example.com"); r != nil {
			t.Errorf("a route configuration without virtual hosts resolved to %s", r.Name)
		}
	}
}

// BenchmarkVHDSAliases resolves 10,000 aliases against 2,000 virtual hosts
// of three domains each (exact, suffix and prefix wildcards), none matching:
// the worst case, a lookup per alias and domain length, where a walk of
// the namespace per alias took 2.4 s in review. Index is the cost of
// building the index, once per content for every stream.
func BenchmarkVHDSAliases(b *testing.B) {
	rc := &routev3.RouteConfiguration{Name: "rc", Vhds: &routev3.Vhds{ConfigSource: &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}}}
	var vhosts []*routev3.VirtualHost
	for i := range 2000 {
		vhosts = append(vhosts, directVHost(fmt.Sprintf("rc/v%d", i), fmt.Sprintf("h%d.example.com", i), fmt.Sprintf("*.s%d.example.com", i), fmt.Sprintf("p%d.*", i)))
	}
	snap := vhdsSnapshot(b, rc, vhosts...)
	set, routes := snap.Set(xdstype.VirtualHostURL), snap.Set(xdstype.RouteURL)
	b.Run("Index", func(b *testing.B) {
		for b.Loop() {
			newVHDSIndex(set, routes)
		}
	})
	idx := newVHDSIndex(set, routes)
	hosts := make([]string, 10000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("nothing-%d.other.org", i)
	}
	b.Run("Resolve10000", func(b *testing.B) {
		for b.Loop() {
			for _, h := range hosts {
				if idx.resolve("rc", h) != nil {
					b.Fatal("matched")
				}
			}
		}
	})
}
