package compile

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/route"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

// TestBudget bounds the wall-clock time of a config's route tests, which
// run on every change (a file change, a resync, an admin write): past it
// the change is refused, naming the test that was running. The most tests
// a config may hold (a thousand) over two thousand regex routes take about
// 20 ms on 2 vCPUs (BenchmarkRouteTestsRegexHeavy, docs/route-tests.md);
// only a config written to be slow gets near the budget.
const TestBudget = 5 * time.Second

// testBudget is how a route test run is bounded: a time budget on a clock
// (injected by tests).
type testBudget struct {
	budget time.Duration
	now    func() time.Time
}

// routeTests runs the config's route tests against the fleet it builds:
// each request through the route engine on its node's group snapshot, what
// happened compared with what the test expects. A failing test is a
// diagnostic naming the test, the expectation and what matched instead,
// so a change that breaks one is refused like an invalid one.
func routeTests(fleet *fleet.Fleet, tests []config.RouteTest) diag.List {
	return runRouteTests(context.Background(), fleet, tests, testBudget{TestBudget, time.Now})
}

// runRouteTests is routeTests within b: the clock is read between tests,
// and ctx (given b's budget in real time) stops a test that walks too many
// routes. Past the budget the run stops with a diagnostic naming the test
// being run; what failed before it is reported too.
func runRouteTests(ctx context.Context, fleet *fleet.Fleet, tests []config.RouteTest, b testBudget) diag.List {
	if len(tests) > config.MaxRouteTests {
		// config.Load refuses these already; the bound is kept here for
		// any other caller.
		t := tests[config.MaxRouteTests]
		return diag.List{{File: t.File, Line: t.Line, Type: "route test", Name: t.Name,
			Message: fmt.Sprintf("%d route tests, over the limit of %d", len(tests), config.MaxRouteTests)}}
	}
	ctx, cancel := context.WithTimeout(ctx, b.budget)
	defer cancel()
	deadline := b.now().Add(b.budget)
	r := testRun{fleet: fleet, seen: map[string]config.RouteTest{}, indexed: map[*snapshot.Snapshot]*route.Resources{}}
	for i, t := range tests {
		err := r.run(ctx, t)
		if err == nil && b.now().After(deadline) {
			err = context.DeadlineExceeded
		}
		if err != nil {
			r.problems = append(r.problems, diag.Diagnostic{File: t.File, Line: t.Line, Type: "route test", Name: t.Name,
				Message: fmt.Sprintf("the route tests ran over their time budget of %v while running this one (test %d of %d); "+
					"every change runs them: test fewer requests, or put fewer regex routes before the ones tested", b.budget, i+1, len(tests))})
			break
		}
	}
	return r.problems
}

// testRun is the state of one run of route tests.
type testRun struct {
	fleet    *fleet.Fleet
	problems diag.List
	seen     map[string]config.RouteTest
	indexed  map[*snapshot.Snapshot]*route.Resources
}

// run runs one test, adding its failures to the run's problems. The error
// is ctx's when the test was cut short.
func (r *testRun) run(ctx context.Context, t config.RouteTest) error {
	bad := func(field, format string, args ...any) {
		r.problems = append(r.problems, diag.Diagnostic{File: t.File, Line: t.Line, Type: "route test", Name: t.Name, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if prev, dup := r.seen[t.Name]; dup {
		bad("name", "duplicate route test name: already defined at %s:%d", prev.File, prev.Line)
		return nil
	}
	r.seen[t.Name] = t
	g, field, err := GroupOf(r.fleet, t.Node, t.Group)
	if err != nil {
		bad(field, "%v", err)
		return nil
	}
	req, err := TestRequest(t.Request)
	if err != nil {
		bad("request", "%v", err)
		return nil
	}
	if isEmpty(t.Expect) {
		bad("expect", "nothing to check: set listener, filter_chain, virtual_host, route, cluster, clusters, redirect, status, grpc_status or unreachable")
		return nil
	}
	if g.Unserved {
		// A shard runs the tests of the groups it serves; another
		// group's are its shards' to run (and pylon validate's).
		return nil
	}
	res := r.indexed[g.Snapshot]
	if res == nil {
		res = route.FromSnapshot(g.Snapshot)
		r.indexed[g.Snapshot] = res
	}
	result, err := route.ExplainContext(ctx, res, req)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	for _, m := range compare(t.Expect, result, err) {
		field := "request"
		if m.field != "" {
			field = "expect." + m.field
		}
		bad(field, "%s (group %s)", m.message, g.Name)
	}
	return nil
}

func isEmpty(e config.TestExpect) bool {
	return e.Listener == "" && e.FilterChain == "" && e.VirtualHost == "" && e.Route == "" && e.Cluster == "" &&
		len(e.Clusters) == 0 && e.Redirect == "" && e.Status == 0 && e.GRPCStatus == "" && !e.Unreachable
}

// TestRequest is the engine's request for a route test's request.
func TestRequest(tr config.TestRequest) (route.Request, error) {
	r, err := route.NewRequest(tr.Method, tr.URL)
	if err != nil {
		return r, err
	}
	if len(tr.Headers) > route.MaxHeaders {
		return r, fmt.Errorf("%d headers, over the limit of %d", len(tr.Headers), route.MaxHeaders)
	}
	names := make([]string, 0, len(tr.Headers))
	for k := range tr.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := r.AddHeader(k, tr.Headers[k]); err != nil {
			return r, err
		}
	}
	r.Port, r.Listener, r.SNI = tr.Port, tr.Listener, tr.SNI
	return r, nil
}

// GroupOf is the group a node is in, by the fleet's group rules (exactly
// as the xDS server resolves a stream's node, with the node's verified
// identities), or the group named. With neither, the fleet must have one
// group. On error it returns the field to blame: node or group.
func GroupOf(fleet *fleet.Fleet, node *config.TestNode, group string) (*fleet.Group, string, error) {
	groups := fleet.Groups()
	switch {
	case node != nil && group != "":
		return nil, "group", fmt.Errorf("give a node or a group, not both")
	case node != nil:
		g := fleet.Group(NodeProto(node), node.Identities)
		if g == nil {
			return nil, "node", fmt.Errorf("node %q is in no group: it would receive nothing", node.ID)
		}
		return g, "", nil
	case group != "":
		for _, g := range groups {
			if g.Name == group {
				return g, "", nil
			}
		}
		return nil, "group", fmt.Errorf("no group %q (the groups are %s)", group, groupNames(groups))
	case len(groups) == 1:
		return groups[0], "", nil
	}
	return nil, "node", fmt.Errorf("the config has several groups (%s): give a node or a group", groupNames(groups))
}

func groupNames(groups []*fleet.Group) string {
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.Name
	}
	return strings.Join(names, ", ")
}

// NodeProto is the xDS node a test node describes, as a proxy would send
// it: what the group rules match on.
func NodeProto(n *config.TestNode) *corev3.Node {
	out := &corev3.Node{Id: n.ID, Cluster: n.Cluster}
	if n.Region != "" || n.Zone != "" || n.SubZone != "" {
		out.Locality = &corev3.Locality{Region: n.Region, Zone: n.Zone, SubZone: n.SubZone}
	}
	if len(n.Metadata) > 0 {
		out.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for k, v := range n.Metadata {
			out.Metadata.Fields[k] = structpb.NewStringValue(v)
		}
	}
	return out
}

// mismatch is an expectation a result does not meet.
type mismatch struct{ field, message string }

// compare checks every expectation set against the result (or the error
// of a request that never reached HTTP routing).
func compare(e config.TestExpect, r *route.Result, err error) []mismatch {
	if err != nil {
		if e.Unreachable {
			return nil
		}
		return []mismatch{{"", fmt.Sprintf("the request is not routed: %v", err)}}
	}
	var out []mismatch
	got := matched(r)
	check := func(field, want, have string) {
		if want != "" && want != have {
			out = append(out, mismatch{field, fmt.Sprintf("want %s %q; got %s", strings.ReplaceAll(field, "_", " "), want, got)})
		}
	}
	if e.Unreachable {
		out = append(out, mismatch{"unreachable", "want the request unreachable; got " + got})
	}
	if l := r.Listener; l != nil {
		check("listener", e.Listener, l.Name)
		check("filter_chain", e.FilterChain, l.FilterChain)
	}
	vh := ""
	if r.VirtualHost != nil {
		vh = r.VirtualHost.Name
	}
	check("virtual_host", e.VirtualHost, vh)
	if e.Route != "" && (r.Route == nil || (e.Route != r.Route.ID && e.Route != r.Route.Name && e.Route != fmt.Sprintf("#%d", r.Route.Index))) {
		out = append(out, mismatch{"route", fmt.Sprintf("want route %q; got %s", e.Route, got)})
	}
	if e.Cluster != "" && (len(r.Clusters) != 1 || r.Clusters[0].Name != e.Cluster) {
		out = append(out, mismatch{"cluster", fmt.Sprintf("want cluster %q alone; got %s", e.Cluster, got)})
	}
	if len(e.Clusters) > 0 && !sameShares(e.Clusters, r.Clusters) {
		out = append(out, mismatch{"clusters", fmt.Sprintf("want the split %s; got %s", shares(e.Clusters), got)})
	}
	redirect := ""
	if r.Redirect != nil {
		redirect = r.Redirect.Location
	}
	check("redirect", e.Redirect, redirect)
	if e.Status != 0 && e.Status != r.Status {
		out = append(out, mismatch{"status", fmt.Sprintf("want status %d; got %s", e.Status, got)})
	}
	check("grpc_status", e.GRPCStatus, r.GRPCStatus)
	return out
}

// matched says in a line what the request matched, for a failing test.
func matched(r *route.Result) string {
	var parts []string
	if l := r.Listener; l != nil {
		parts = append(parts, fmt.Sprintf("listener %q", l.Name))
		if l.FilterChain != "" {
			parts = append(parts, fmt.Sprintf("filter chain %q", l.FilterChain))
		}
	}
	if v := r.VirtualHost; v != nil {
		parts = append(parts, fmt.Sprintf("virtual host %q", v.Name))
	}
	if rt := r.Route; rt != nil {
		parts = append(parts, fmt.Sprintf("route %q", rt.ID))
	}
	return strings.Join(parts, ", ") + ": " + r.Outcome
}

// sameShares compares a split by shares (weights normalised). Both sides'
// shares sum to 1, so when every wanted share is met no other cluster can
// take any traffic.
func sameShares(want map[string]uint32, got []route.ClusterShare) bool {
	var total uint64
	for _, w := range want {
		total += uint64(w)
	}
	if total == 0 {
		return false
	}
	have := map[string]float64{}
	for _, c := range got {
		have[c.Name] += c.Share
	}
	for name, w := range want {
		if math.Abs(have[name]-float64(w)/float64(total)) > 1e-9 {
			return false
		}
	}
	return true
}

func shares(m map[string]uint32) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
