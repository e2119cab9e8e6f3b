// Package deploy_test checks the shipped operations files: the Prometheus
// alerting rules and the Grafana dashboard. Every metric they name must be
// one Pylon exports, read from a real registry after driving the real
// pieces (pipeline, xDS server, status tracker), so a renamed metric or a
// typo in a rule fails here rather than silently never firing.
package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/guard"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const (
	rulesFile     = "prometheus/alerts.yaml"
	dashboardFile = "grafana/pylon.json"
)

// synthesized are series Prometheus makes itself for every target, with
// their labels: rules may use them although Pylon does not export them.
var synthesized = map[string][]string{"up": {"job", "instance"}}

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = []string{"job", "instance"}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// TestAlertRules checks each rule's structure and that its expression
// names only exported metrics and labels.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	exported := exportedMetrics(t)
	seen := map[string]bool{}
	n := 0
	for _, g := range f.Groups {
		if g.Name == "" {
			t.Errorf("%s: a group has no name", rulesFile)
		}
		for i, r := range g.Rules {
			n++
			where := fmt.Sprintf("%s: group %q rule %d (%s)", rulesFile, g.Name, i, r.Alert)
			checkRule(t, where, r, seen)
			checkExpr(t, where, r.Expr, exported)
		}
	}
	for _, want := range []string{"PylonProxiesNACKing", "PylonProxiesStale", "PylonConfigRefused", "PylonPushLatencyOverSLO",
		"PylonNoProxiesConnected", "PylonStreamsRefusedIdentityMismatch", "PylonStreamsEvictedStalled",
		"PylonCertificateExpiringSoon", "PylonCertificateExpiryCritical", "PylonGitPollsFailing"} {
		if !seen[want] {
			t.Errorf("%s: no alert %s", rulesFile, want)
		}
	}
	t.Logf("%d rules checked against %d exported metric names", n, len(exported))
}

var alertName = regexp.MustCompile(`^Pylon[A-Z][A-Za-z0-9]*$`)

func checkRule(t *testing.T, where string, r rule, seen map[string]bool) {
	t.Helper()
	switch {
	case !alertName.MatchString(r.Alert):
		t.Errorf("%s: alert name %q: want PylonCamelCase", where, r.Alert)
	case seen[r.Alert]:
		t.Errorf("%s: alert %s defined twice", where, r.Alert)
	}
	seen[r.Alert] = true
	if strings.TrimSpace(r.Expr) == "" {
		t.Errorf("%s: expr is empty", where)
	}
	if _, err := model.ParseDuration(r.For); err != nil {
		t.Errorf("%s: for %q: %v (write it, 0m included, so the bound is a decision)", where, r.For, err)
	}
	if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
		t.Errorf("%s: labels.severity %q: want critical, warning or info", where, s)
	}
	for _, a := range []string{"summary", "description"} {
		if strings.TrimSpace(r.Annotations[a]) == "" {
			t.Errorf("%s: annotations.%s is empty", where, a)
		}
	}
}

// checkExpr checks that expr names only exported metrics, labels they
// carry, and label values they take (for equality matchers on labels whose
// values the driven registry shows).
func checkExpr(t *testing.T, where, expr string, exported map[string]*family) {
	t.Helper()
	r, err := parseRefs(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(r.metrics) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	labels := map[string]bool{}
	for _, l := range targetLabels {
		labels[l] = true
	}
	known := true
	for _, m := range r.metrics {
		f := exported[m]
		if f == nil {
			t.Errorf("%s: %q names %s, which Pylon does not export (exported: %s)", where, expr, m, names(exported))
			continue
		}
		if f.labels == nil {
			known = false
		}
		for l := range f.labels {
			labels[l] = true
		}
	}
	for _, l := range r.labels {
		if known && !labels[l] {
			t.Errorf("%s: %q uses label %q, which none of %v carries", where, expr, l, r.metrics)
		}
	}
	for _, m := range r.matchers {
		f := exported[m.metric]
		if f == nil || !f.bounded[m.label] {
			continue
		}
		if !f.values[m.label][m.value] {
			t.Errorf("%s: %q matches %s{%s=%q}, a value Pylon does not export (seen: %v)", where, expr, m.metric, m.label, m.value, keys(f.values[m.label]))
		}
	}
}

// family is what the registry shows of one series name.
type family struct {
	labels map[string]bool
	values map[string]map[string]bool
	// bounded marks labels whose values come from a small fixed set in
	// Pylon's code, so a rule's value can be checked.
	bounded map[string]bool
}

// boundedLabels are the labels whose every value the driven registry
// shows (the test drives each one).
var boundedLabels = map[string]bool{"state": true, "result": true, "reason": true}

// exportedMetrics returns every series name a Pylon server exports once
// it has served: the real pipeline publishes the quickstart and refuses a
// bad update, a real xDS server serves proxies that ACK and NACK and asks
// for an unknown type, and refusals go through the daemon's observer.
// Histograms count as their _bucket, _sum and _count series.
func exportedMetrics(t *testing.T) map[string]*family {
	t.Helper()
	reg, pub := xdstype.New(), fleet.NewPublisher()
	obs := daemon.NewObservability(reg, pub)
	drive(t, reg, pub, obs)
	fams, err := obs.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*family{}
	for name, ls := range synthesized {
		f := &family{labels: map[string]bool{}, values: map[string]map[string]bool{}, bounded: map[string]bool{}}
		for _, l := range ls {
			f.labels[l] = true
		}
		out[name] = f
	}
	for _, mf := range fams {
		f := &family{labels: map[string]bool{}, values: map[string]map[string]bool{}, bounded: boundedLabels}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				f.labels[lp.GetName()] = true
				if f.values[lp.GetName()] == nil {
					f.values[lp.GetName()] = map[string]bool{}
				}
				f.values[lp.GetName()][lp.GetValue()] = true
			}
		}
		out[mf.GetName()] = f
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			b := &family{labels: map[string]bool{"le": true}, values: f.values, bounded: f.bounded}
			for l := range f.labels {
				b.labels[l] = true
			}
			out[mf.GetName()+"_bucket"] = b
			out[mf.GetName()+"_sum"], out[mf.GetName()+"_count"] = f, f
		case dto.MetricType_SUMMARY:
			out[mf.GetName()+"_sum"], out[mf.GetName()+"_count"] = f, f
		}
	}
	// Names is the metrics package's own list: a family it lists that the
	// drive above left without a series still exists, its labels unknown.
	for _, n := range obs.Metrics.Names() {
		if out[n] == nil {
			t.Logf("%s has no series after the drive: its labels are not checked", n)
			out[n] = &family{labels: nil, values: map[string]map[string]bool{}, bounded: map[string]bool{}}
		}
	}
	return out
}

// drive makes every vector metric have children, through the real pieces.
func drive(t *testing.T, reg *xdstype.Registry, pub *fleet.Publisher, obs *daemon.Observability) {
	t.Helper()
	pipe := pipeline.New(pipeline.Options{Registry: reg, Publish: pipeline.PublishTo(pub), Logger: slog.New(slog.DiscardHandler),
		OnResult: func(result string, f *fleet.Fleet) { // as daemon.Run wires it
			obs.Metrics.Publish(result)
			if f != nil {
				obs.Published(f)
			}
		}})
	good := source.Update{Files: []config.File{{Path: examples.QuickstartName, Data: examples.Quickstart()}}, AcceptedAt: time.Now()}
	if err := pipe.Apply(good); err != nil {
		t.Fatalf("quickstart refused: %v", err)
	}
	if err := pipe.Apply(good); err != nil { // unchanged
		t.Fatal(err)
	}
	if err := pipe.Apply(source.Update{Err: errors.New("config folder unreadable"), AcceptedAt: time.Now()}); err == nil {
		t.Fatal("a failed read was not refused")
	}
	obs.Metrics.SourceEvent()
	obs.Metrics.Reload()

	addr := serve(t, reg, pub, obs)
	conn := xdstest.Dial(t, addr)
	ok := xdstest.OpenADS(t, conn, xdstest.Node("acks"))
	ok.Request(xdstype.ClusterURL)
	ok.ACK(ok.RecvType(xdstype.ClusterURL))
	// A change accepted while the stream is open, ACKed: push latency.
	changed := bytes.ReplaceAll(examples.Quickstart(), []byte("connect_timeout: 1s"), []byte("connect_timeout: 2s"))
	if err := pipe.Apply(source.Update{Files: []config.File{{Path: examples.QuickstartName, Data: changed}}, AcceptedAt: time.Now()}); err != nil {
		t.Fatalf("changed quickstart refused: %v", err)
	}
	ok.ACK(ok.RecvType(xdstype.ClusterURL))
	bad := xdstest.OpenADS(t, conn, xdstest.Node("nacks"))
	bad.Request(xdstype.ClusterURL)
	bad.NACK(bad.RecvType(xdstype.ClusterURL), "", "rejected")
	bad.Request("type.googleapis.com/no.such.Type")

	// Refusals that need hostile clients go through the daemon's
	// observer, with the xds package's own reasons.
	for _, reason := range []string{xds.RefusedIdentity, xds.RefusedBadNode, xds.RefusedResourceNames, xds.RefusedStalled, xds.RefusedFlood, xds.RefusedBusy, xds.RefusedDraining} {
		obs.Observer.Observe(&status.Event{Kind: status.StreamRefused, StreamID: 1 << 40, Node: xdstest.Node("hostile"), Reason: reason, Detail: "test", At: time.Now()})
	}
	// Connections the server closed, and a stream over the per-connection
	// bound, as the tracked listener reports them.
	obs.Observer.Observe(&status.Event{Kind: status.ConnectionClosed, Reason: "evicted", At: time.Now()})
	obs.Observer.Observe(&status.Event{Kind: status.TransportRefused, Reason: guard.TransportRefusedStreams, At: time.Now()})
	// A reconnect spared its resend (X24): what a failover looks like.
	obs.Observer.Observe(&status.Event{Kind: status.ResponseSpared, StreamID: 1 << 41, Node: xdstest.Node("moved"), TypeURL: xdstype.ClusterURL,
		Version: "v1", Resources: 1, Bytes: 100, At: time.Now()})
	// Certificates: the Secrets' source is the observability's own (the
	// quickstart serves none); the server's and the clients' are the
	// daemon's TLS files and xDS server, given here as the daemon does.
	in := time.Now().Add(30 * 24 * time.Hour)
	obs.Metrics.CertificateExpiry(metrics.CertServer, func() (time.Time, bool) { return in, true })
	obs.Metrics.CertificateExpiry(metrics.CertClient, func() (time.Time, bool) { return in, true })
	waitGathered(t, obs, "pylon_certificate_expiry_seconds", "pylon_push_latency_seconds", "pylon_first_sync_seconds", "pylon_xds_nacks_total", "pylon_xds_requests_ignored_total")
}

// serve runs a real xDS server reporting to obs on 127.0.0.1:0, as
// xdstest starts it (the daemon's gRPC options and tracked listener).
func serve(t *testing.T, reg *xdstype.Registry, pub *fleet.Publisher, obs *daemon.Observability) string {
	t.Helper()
	return xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Observer: obs.Observer, Identifier: "deploy-test"}).Addr
}

// waitGathered waits (bounded) until each named family has a series: the
// server reports ACKs and NACKs from its stream loop, after the client sent
// them.
func waitGathered(t *testing.T, obs *daemon.Observability, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		fams, err := obs.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		missing := slices.Clone(want)
		for _, mf := range fams {
			if len(mf.GetMetric()) > 0 {
				missing = slices.DeleteFunc(missing, func(n string) bool { return n == mf.GetName() })
			}
		}
		if len(missing) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("metrics never showed a series: %v", missing)
		case <-tick.C:
		}
	}
}

func names(m map[string]*family) string {
	var out []string
	for n := range m {
		if strings.HasPrefix(n, "pylon_") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPromtool runs "promtool check rules" on the rules, and the rules'
// unit tests with "promtool test rules". Without promtool the test skips,
// except in CI (CI=true), where it fails: .ci/run installs it (Debian
// package prometheus).
func TestPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed: CI must install it (apt-get install prometheus) to check the shipped rules")
		}
		t.Skip("promtool is not installed (Debian package prometheus); the rules' PromQL syntax is not checked")
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", "prometheus/alerts_test.yaml"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of a Grafana dashboard this test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Panels     []panel         `json:"panels"`
	Targets    []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// TestDashboard checks the dashboard's structure, and that every panel
// target and template query names only exported metrics and labels.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q: both are needed to import it", dashboardFile, d.UID, d.Title)
	}
	exported := exportedMetrics(t)
	ids := map[int]bool{}
	targets := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("%s: panel %d %q", dashboardFile, p.ID, p.Title)
			if p.ID == 0 || ids[p.ID] || p.Title == "" {
				t.Errorf("%s: every panel needs a unique id and a title", where)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if !strings.Contains(string(p.Datasource), "${datasource}") || len(p.Targets) == 0 {
				t.Errorf("%s: needs the ${datasource} variable and at least one target", where)
			}
			for _, tg := range p.Targets {
				targets++
				if tg.RefID == "" {
					t.Errorf("%s: a target has no refId", where)
				}
				checkExpr(t, where, tg.Expr, exported)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`).FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable %s: query %q: want label_values(metric, label)", dashboardFile, v.Name, v.Definition)
			continue
		}
		checkExpr(t, dashboardFile+": variable "+v.Name, m[1]+" by ("+m[2]+")", exported)
	}
	for _, want := range []string{"pylon_xds_streams", "pylon_proxy_types", "pylon_push_latency_seconds_bucket", "pylon_xds_nacks_total", "pylon_config_publishes_total", "pylon_xds_streams_refused_total"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: no panel shows %s", dashboardFile, want)
		}
	}
	t.Logf("%d panels, %d targets checked", len(ids), targets)
}

// TestParseRefs pins the expression scanner the checks rely on.
func TestParseRefs(t *testing.T) {
	cases := []struct {
		expr, metrics, labels string
	}{
		{`histogram_quantile(0.99, sum by (instance, le) (rate(pylon_push_latency_seconds_bucket{type="CDS"}[10m]))) > 5`, "pylon_push_latency_seconds_bucket", "instance le type"},
		{`(sum by (instance) (pylon_xds_streams) or on(instance) (0 * (up{job="pylon"} == 1))) == 0`, "pylon_xds_streams up", "instance instance job"},
		{`sum(rate(pylon_xds_nacks_total{instance=~"$instance"}[$__rate_interval])) without (type) offset 5m`, "pylon_xds_nacks_total", "instance type"},
		{`max(pylon_proxy_types{state!="a,b}"}) / 1e3`, "pylon_proxy_types", "state"},
	}
	for _, c := range cases {
		r, err := parseRefs(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.metrics, " "); got != c.metrics {
			t.Errorf("%s: metrics %q, want %q", c.expr, got, c.metrics)
		}
		if got := strings.Join(r.labels, " "); got != c.labels {
			t.Errorf("%s: labels %q, want %q", c.expr, got, c.labels)
		}
	}
	if _, err := parseRefs(`pylon_x{state="a}`); err == nil {
		t.Error("an unclosed string parsed")
	}
}
