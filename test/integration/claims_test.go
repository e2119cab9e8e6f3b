package integration

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// heldConfig is clusters (STATIC, no endpoints) and the route r1 to
// route's cluster, as raw resources, with xdstest's probe (ExpectSilence).
func heldConfig(route string, clusters ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\nresources:\n- \"@type\": type.googleapis.com/envoy.service.runtime.v3.Runtime\n  name: " + xdstest.ProbeName + "\n")
	for _, c := range clusters {
		fmt.Fprintf(&b, "- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: %s\n  connect_timeout: 1s\n  type: STATIC\n", c)
	}
	fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: r1
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: { prefix: "/" }
      route: { cluster: %s }
`, route)
	return b.String()
}

// README's "a resource held back for a rejected dependency, once": a
// route naming a cluster the proxy NACKed is held back, and the log says
// so once per route version, not at each plan that holds it again.
func TestHeldBackResourceLoggedOnce(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, heldConfig("a", "a"))
	logs := &daemontest.LogBuffer{}
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("n1"))
	s.Request(xdstype.ClusterURL)
	cds := s.RecvType(xdstype.ClusterURL)
	s.ACK(cds)
	s.Request(xdstype.RouteURL, "r1")
	s.ACK(s.RecvType(xdstype.RouteURL), "r1")

	// r1 moves to the new cluster c, which the proxy rejects; then
	// another cluster comes, and the proxy rejects that set too.
	for i, world := range [][]string{{"a", "c"}, {"a", "c", "d"}} {
		writeAtomically(t, cfg, heldConfig("c", world...))
		s.NACK(s.RecvType(xdstype.ClusterURL), cds.VersionInfo, "cluster c: rejected")
		if !eventually(func() bool { return counter(scrape(t, p), "pylon_xds_nacks_total", "type", "CDS") == float64(i+1) }) {
			t.Fatalf("NACK %d not counted:\n%s", i+1, grepLines(p.get(t, "/metrics"), "pylon_xds_nacks_total"))
		}
	}
	line := regexp.MustCompile(`(?m)^.*level=WARN msg="holding a resource back: the proxy rejected what it names; it goes out once the config changes".*resource=r1 .*rejected=.*$`)
	if !eventually(func() bool { return line.MatchString(logs.String()) }) {
		t.Fatalf("no line says r1 is held back for the rejected cluster:\n%s", logs.String())
	}
	if n := len(line.FindAllString(logs.String(), -1)); n != 1 {
		t.Fatalf("r1 held back logged %d times, want once:\n%s", n, logs.String())
	}
	s.ExpectSilence() // and r1 was not sent
}

// README's pylon_config_source_events_total: file events seen before
// debouncing, beside the reloads they fold into.
func TestConfigSourceEventsCounted(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, heldConfig("a", "a"))
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg})
	events := func() float64 { return plainCounter(t, p, "pylon_config_source_events_total") }
	before := events()
	writeAtomically(t, cfg, heldConfig("b", "a", "b"))
	if !eventually(func() bool { return events() > before }) {
		t.Fatalf("a config write is not counted: %v events before, %v after", before, events())
	}
	if r := plainCounter(t, p, "pylon_config_reloads_total"); r < 1 {
		t.Fatalf("pylon_config_reloads_total %v after a write, want at least 1", r)
	}
}

// plainCounter reads an unlabelled counter from a scrape.
func plainCounter(t *testing.T, p *pylon, name string) float64 {
	t.Helper()
	ms := scrape(t, p)[name].GetMetric()
	if len(ms) != 1 {
		t.Fatalf("%d series of %s in the scrape, want 1", len(ms), name)
	}
	return ms[0].GetCounter().GetValue()
}
