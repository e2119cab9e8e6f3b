package route

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/grpcrules"
)

// RulesDocs is where each rule of a gRPC client is explained.
const RulesDocs = "docs/grpc.md#refusals"

// maxClientProblems bounds the problems listed for one client: a generated
// config may repeat one mistake on thousands of clusters.
const maxClientProblems = 20

// ClientCheck is, for a proxyless gRPC call explained for one client
// implementation, whether what that client fetches for the call's target
// (its api_listener, the route configuration, every cluster the routes
// name and their endpoints) passes the client's rules (grpcrules), and
// what the client does with this call.
type ClientCheck struct {
	Client string `json:"client"`
	// From says how the client is known: given, the node's user agent, or
	// the group's `clients:`.
	From string `json:"from"`
	// RulesFrom is the release the client's rules were read from.
	RulesFrom string          `json:"rulesFrom"`
	Passes    bool            `json:"passes"`
	Problems  []ClientProblem `json:"problems,omitempty"`
	// More counts the problems past the first maxClientProblems.
	More int `json:"more,omitempty"`
	// Call says in a line what the client does with this call.
	Call string `json:"call"`
}

// ClientProblem is a rule of the client a fetched resource breaks.
type ClientProblem struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Field string `json:"field,omitempty"`
	// Effect is the client's: NACK, fails RPCs, ignores it, crashes.
	Effect  string `json:"effect"`
	Message string `json:"message"`
	Rule    string `json:"rule"`
	Docs    string `json:"docs"`
	// ThisCall: the problem changes what happens to the call explained.
	ThisCall bool `json:"thisCall,omitempty"`
}

// fetched is one resource a gRPC client fetches for a target.
type fetched struct {
	kind, name string
	msg        proto.Message
	// call: the resource decides this call whatever its field (the
	// listener and routes, read whole; the call's clusters and endpoints).
	call bool
}

// CheckClient checks what client fetches for the target of out, a gRPC
// call explained on res; nil for a request that is no gRPC call or never
// reached a listener. from says how the client is known.
func CheckClient(res *Resources, out *Result, client grpcrules.Client, from string) *ClientCheck {
	if !out.Request.GRPC || out.Listener == nil {
		return nil
	}
	c := &ClientCheck{Client: string(client), From: from, RulesFrom: grpcrules.Versions[client]}
	routePath := callRoute(res, out)
	for _, f := range fetchedFor(res, out) {
		for _, p := range grpcrules.Check(f.msg, []grpcrules.Client{client}) {
			if len(c.Problems) == maxClientProblems {
				c.More++
				continue
			}
			this := f.call && (f.kind == "Cluster" || f.kind == "ClusterLoadAssignment" || p.Rule.Effect != grpcrules.Unusable ||
				routePath != "" && strings.Contains(p.Field+".", routePath+"."))
			c.Problems = append(c.Problems, ClientProblem{Type: f.kind, Name: f.name, Field: p.Field, Effect: string(p.Rule.Effect),
				Message: p.Message, Rule: p.Rule.ID, Docs: RulesDocs, ThisCall: this})
		}
	}
	c.Passes = len(c.Problems) == 0
	c.Call = c.verdict()
	return c
}

// severity orders effects: the worst decides what the call sees.
var severity = []grpcrules.Effect{grpcrules.Crash, grpcrules.NACK, grpcrules.Unusable, grpcrules.Ignored}

func (c *ClientCheck) verdict() string {
	for _, e := range severity {
		for _, p := range c.Problems {
			if !p.ThisCall || p.Effect != string(e) {
				continue
			}
			what := fmt.Sprintf("%s %q (rule %s)", p.Type, p.Name, p.Rule)
			switch e {
			case grpcrules.Crash:
				return fmt.Sprintf("%s crashes on %s: the process ends, and this RPC with it", c.Client, what)
			case grpcrules.NACK:
				return fmt.Sprintf("%s NACKs %s: it runs what it last ACKed of it (with nothing ACKed, this RPC fails with UNAVAILABLE), not what is explained here", c.Client, what)
			case grpcrules.Unusable:
				return fmt.Sprintf("%s accepts %s %q and fails this RPC (rule %s)", c.Client, p.Type, p.Name, p.Rule)
			default:
				return fmt.Sprintf("%s accepts %s and ignores %s: it balances otherwise than explained", c.Client, what, p.Field)
			}
		}
	}
	if c.Passes {
		return c.Client + " takes this RPC as explained"
	}
	return c.Client + " takes this RPC as explained; what it fetches breaks its rules elsewhere (below)"
}

// callRoute is the field path of the route the call took in its route
// configuration ("virtual_hosts[0].routes[2]"), "" when none took it.
func callRoute(res *Resources, out *Result) string {
	rc := routesOf(res, out)
	if rc == nil || out.VirtualHost == nil || out.Route == nil {
		return ""
	}
	for i, vh := range rc.GetVirtualHosts() {
		if vh.GetName() == out.VirtualHost.Name {
			return fmt.Sprintf("virtual_hosts[%d].routes[%d]", i, out.Route.Index)
		}
	}
	return ""
}

// routesOf is the route configuration of the call's listener: over RDS,
// or inline.
func routesOf(res *Resources, out *Result) *routev3.RouteConfiguration {
	if out.RouteConfigFrom == "rds" {
		return res.Routes[out.RouteConfig]
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if l := res.Listeners[out.Listener.Name]; l.GetApiListener().GetApiListener().UnmarshalTo(hcm) == nil {
		return hcm.GetRouteConfig()
	}
	return nil
}

// fetchedFor lists what a gRPC client fetches for the call's target, in
// the order it fetches them: the listener, its routes over RDS, the
// clusters every route names (sorted), their endpoints.
func fetchedFor(res *Resources, out *Result) []fetched {
	var list []fetched
	if l := res.Listeners[out.Listener.Name]; l != nil {
		list = append(list, fetched{"Listener", l.GetName(), l, true})
	}
	rc := routesOf(res, out)
	if rc != nil && out.RouteConfigFrom == "rds" {
		list = append(list, fetched{"RouteConfiguration", rc.GetName(), rc, true})
	}
	var taken []string
	for _, s := range out.Clusters {
		if s.Share > 0 {
			taken = append(taken, s.Name)
		}
	}
	for _, name := range clusterNames(rc) {
		cl := res.Clusters[name]
		if cl == nil {
			continue
		}
		call := slices.Contains(taken, name)
		list = append(list, fetched{"Cluster", name, cl, call})
		eds := cl.GetEdsClusterConfig().GetServiceName()
		if eds == "" {
			eds = name
		}
		if cla := res.Endpoints[eds]; cla != nil && cl.GetType() == clusterv3.Cluster_EDS && cl.GetClusterType() == nil {
			list = append(list, fetched{"ClusterLoadAssignment", eds, cla, call})
		}
	}
	return list
}

// clusterNames are the clusters the routes of rc name, sorted.
func clusterNames(rc *routev3.RouteConfiguration) []string {
	seen := map[string]bool{}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if n := a.GetCluster(); n != "" {
				seen[n] = true
			}
			for _, wc := range a.GetWeightedClusters().GetClusters() {
				seen[wc.GetName()] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
