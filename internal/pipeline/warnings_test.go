package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A config with thousands of warnings (thousands of routes to a service
// with no endpoints) is served, and its status keeps the first
// MaxWarnings of them with the total: /status and /summary, polled every
// few seconds, stay small.
func TestStatusKeepsTheFirstWarningsAndTheirCount(t *testing.T) {
	const n = 3 * MaxWarnings
	var b strings.Builder
	b.WriteString("services:\n- name: waiting\nlisteners:\n- { name: http, port: 10000, routes: all }\nroutes:\n- name: all\n  virtual_hosts:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - { name: v%d, domains: [\"v%d.example\"], routes: [{ to: [{ service: waiting }] }] }\n", i, i)
	}
	p := New(Options{Registry: xdstype.New(), Publish: PublishTo(fleet.NewPublisher())})
	if err := p.Apply(newUpdate("pylon.yaml", []byte(b.String()))); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if len(st.Warnings) != MaxWarnings || st.WarningsTotal != n {
		t.Fatalf("status holds %d warnings, total %d; want the first %d, total %d", len(st.Warnings), st.WarningsTotal, MaxWarnings, n)
	}
	if w := st.Warnings[0]; !strings.Contains(w.Field, "virtual_hosts[0]") {
		t.Errorf("the first warning kept is %v, want the first of the config's", w)
	}
}
