package compile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// regexHeavy is a config of vhosts virtual hosts of perHost routes, every
// route matched by a path regex and a header regex, with n route tests
// spread over the virtual hosts and over each one's routes (a test of
// route i walks the i routes before it). pad lengthens each test's path:
// the longer the input, the longer every regex runs on it; with scan, every
// route's regex reads the whole path before it can fail.
func regexHeavy(vhosts, perHost, n, pad int, scan bool) config.File {
	pathRegex := "/v[0-9]+/r%d/(items|orders|carts)/[a-z0-9-]+(/.*)?"
	if scan {
		pathRegex = "/v[0-9]+/.*/r%d/(items|orders|carts)/.*"
	}
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "- { name: svc-%d, endpoints: [{ address: 10.0.%d.10, port: 8080 }] }\n", i, i)
	}
	b.WriteString("routes:\n- name: api\n  virtual_hosts:\n")
	for h := range vhosts {
		fmt.Fprintf(&b, "  - name: host-%d\n    domains: [\"host-%d.example.com\"]\n    routes:\n", h, h)
		for r := range perHost {
			fmt.Fprintf(&b, "    - match: { regex: \""+pathRegex+"\", headers: [{ name: x-tenant, regex: \"tenant-[0-9]+\" }] }\n", r)
			fmt.Fprintf(&b, "      to: [{ service: svc-%d }]\n", (h*perHost+r)%50)
		}
	}
	b.WriteString("listeners:\n- { name: http, port: 8080, routes: api }\ntests:\n")
	tail := strings.Repeat("x", pad)
	for i := range n {
		h, r := i%vhosts, (i*7)%perHost
		fmt.Fprintf(&b, "- name: t%d\n  request: { url: \"http://host-%d.example.com/v1/r%d/items/abc-%d/%s\", port: 8080, headers: { x-tenant: tenant-%d } }\n", i, h, r, i, tail, i)
		fmt.Fprintf(&b, "  expect: { cluster: svc-%d, route: \"#%d\" }\n", (h*perHost+r)%50, r)
	}
	return config.File{Path: "heavy.yaml", Data: []byte(b.String())}
}

// BenchmarkRouteTestsRegexHeavy compiles a config of 2,000 regex routes
// (20 virtual hosts of 100) with its 1,000 route tests: the cost route
// tests add to every change (docs/route-tests.md). The NoTests variant is
// the same compile without them, for the difference.
func BenchmarkRouteTestsRegexHeavy(b *testing.B) {
	f := regexHeavy(20, 100, config.MaxRouteTests, 0, false)
	reg := xdstype.New()
	b.Run("WithTests", func(b *testing.B) {
		for b.Loop() {
			if _, err := Compile(reg, []config.File{f}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TestsOnly", func(b *testing.B) {
		benchTestsOnly(b, f)
	})
	b.Run("NoTests", func(b *testing.B) {
		for b.Loop() {
			if _, err := CompileSkippingTests(reg, []config.File{f}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchTestsOnly times the route tests of f alone, on its compiled fleet.
func benchTestsOnly(b *testing.B, f config.File) {
	reg := xdstype.New()
	fleet, err := CompileSkippingTests(reg, []config.File{f}, nil)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := config.Load(reg, []config.File{f})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := runRouteTests(context.Background(), fleet, doc.Tests, testBudget{time.Hour, time.Now}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
