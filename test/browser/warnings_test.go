package browser

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pylon-xds/pylon/internal/daemon"
)

// waitingDocument routes to a service with no endpoints yet: accepted,
// with a warning on the route's line.
const waitingDocument = `services:
- name: waiting
listeners:
- { name: waiting-http, port: 10100, routes: waiting-all }
routes:
- name: waiting-all
  virtual_hosts:
  - { name: any, domains: ["*"], routes: [{ to: [{ service: waiting }] }] }
`

// TestConfigWarnings: the overview shows the served config's warnings
// beside the refused-change card, each with its place (file or stored
// object and line, object, field) and message; a config without warnings
// shows none.
func TestConfigWarnings(t *testing.T) {
	ctx := browser(t)
	p := startPylon(t, daemon.Options{})
	_, version := p.apply(t, waitingDocument)
	p.signIn(t, ctx, p.readToken)
	goTo(t, ctx, "#/overview")
	waitJS(t, ctx, "the warnings card", `!!document.querySelector('#warnings li')`)
	text := get(t, ctx, "the warnings card", chromedp.Evaluate[string](`document.querySelector('#warnings').textContent`))
	for _, want := range []string{
		"1 config warning", "version " + version[:12],
		`RouteConfiguration "waiting-all"`, "virtual_hosts[0].routes[0]", `Cluster "waiting", whose endpoint set is empty`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the warnings card lacks %q: %q", want, text)
		}
	}
	// Applied through the API without a file name, the place is the
	// stored object and its line.
	if !strings.Contains(text, "routes/waiting-all:1 · ") {
		t.Errorf("the warning does not say its place (routes/waiting-all:1): %q", text)
	}
	next := get(t, ctx, "what follows the refused card", chromedp.Evaluate[string](`(document.querySelector('#refused').nextElementSibling || {}).id || ''`))
	if next != "warnings" {
		t.Errorf("the warnings card is not beside the refused-change card: after it comes %q", next)
	}
	screenshot(t, ctx, "overview-warnings")

	p.apply(t, strings.Replace(waitingDocument, "- name: waiting\n", "- name: waiting\n  endpoints: [{ address: 10.0.0.1, port: 8080 }]\n", 1))
	waitJS(t, ctx, "no warnings card once the service has endpoints", `!document.querySelector('#warnings')`)
}
