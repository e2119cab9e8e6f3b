package pipeline

import (
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/route"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const routeTested = `services:
- { name: cart, endpoints: [{ address: 10.0.0.1, port: 8080 }] }
- { name: cart-canary, endpoints: [{ address: 10.0.0.2, port: 8080 }] }
routes:
- name: shop
  virtual_hosts:
  - name: shop
    domains: [shop.example.com]
    routes:
    - match: { prefix: /api/cart, headers: [{ name: x-canary, exact: "1" }] }
      to: [{ service: cart-canary }]
    - to: [{ service: cart }]
listeners:
- { name: http, port: 8080, routes: shop }
tests:
- name: canary header reaches the canary
  request: { url: "http://shop.example.com/api/cart", port: 8080, headers: { x-canary: "1" } }
  expect: { route: "#0", cluster: cart-canary }
`

// A change that breaks a route test is refused like an invalid one: the
// last good fleet keeps serving, the refusal names the test, the
// expectation and what matched instead; fixing the change publishes it.
func TestFailingRouteTestRefusesChange(t *testing.T) {
	pub := fleet.NewPublisher()
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(pub)})
	if err := p.Apply(newUpdate("pylon.yaml", []byte(routeTested))); err != nil {
		t.Fatal(err)
	}
	good := pub.Current()

	// Someone reorders the routes: the catch-all now shadows the canary.
	broken := strings.Replace(routeTested, `    - match: { prefix: /api/cart, headers: [{ name: x-canary, exact: "1" }] }
      to: [{ service: cart-canary }]
    - to: [{ service: cart }]`, `    - to: [{ service: cart }]
    - match: { prefix: /api/cart, headers: [{ name: x-canary, exact: "1" }] }
      to: [{ service: cart-canary }]`, 1)
	if broken == routeTested {
		t.Fatal("the edit did not apply")
	}
	err := p.Apply(newUpdate("pylon.yaml", []byte(broken)))
	if err == nil {
		t.Fatal("a change breaking a route test was published")
	}
	if pub.Current() != good {
		t.Fatal("the refused change replaced the last good fleet")
	}
	st := p.Status()
	if st.Refused == nil || len(st.Refused.Diagnostics) != 1 {
		t.Fatalf("refusal: %+v", st.Refused)
	}
	// The route is still "#0" (another one now): only the cluster differs.
	d := st.Refused.Diagnostics[0]
	want := `want cluster "cart-canary" alone; got listener "http", filter chain "#0", virtual host "shop", route "#0": forwarded to cart (group default)`
	if d.File != "pylon.yaml" || d.Line != 18 || d.Type != "route test" || d.Name != "canary header reaches the canary" || d.Field != "expect.cluster" || d.Message != want {
		t.Errorf("diagnostic: %+v", d)
	}

	// The fleet still serving routes the canary header to the canary.
	res := route.FromSnapshot(pub.Current().Groups()[0].Snapshot)
	req, _ := route.ParseRequest("GET http://shop.example.com/api/cart", []string{"x-canary: 1"})
	req.Port = 8080
	if r, err := route.Explain(res, req); err != nil || r.Clusters[0].Name != "cart-canary" {
		t.Fatalf("the serving fleet: %+v, %v", r, err)
	}

	// A change that keeps the test passing is published.
	moved := strings.Replace(routeTested, "port: 8080, routes: shop", "port: 8080, routes: shop, address: 127.0.0.1", 1)
	if err := p.Apply(newUpdate("pylon.yaml", []byte(moved))); err != nil {
		t.Fatal(err)
	}
	if pub.Current() == good || p.Status().Refused != nil {
		t.Fatal("a passing change was not published")
	}
}
