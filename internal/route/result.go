package route

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Resources are the Envoy resources one node runs, by name.
type Resources struct {
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
	Clusters  map[string]*clusterv3.Cluster
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
	// regex is shared by every Explain on these resources (FromSnapshot
	// sets it; nil: each Explain compiles its own).
	regex *regexes
}

// FromSnapshot indexes a group snapshot's resources (shared, not copied).
func FromSnapshot(s *snapshot.Snapshot) *Resources {
	r := &Resources{
		Listeners: map[string]*listenerv3.Listener{},
		Routes:    map[string]*routev3.RouteConfiguration{},
		Clusters:  map[string]*clusterv3.Cluster{},
		Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
		regex:     &regexes{},
	}
	index(s, xdstype.ListenerURL, r.Listeners)
	index(s, xdstype.RouteURL, r.Routes)
	index(s, xdstype.ClusterURL, r.Clusters)
	index(s, xdstype.EndpointURL, r.Endpoints)
	return r
}

func index[T any](s *snapshot.Snapshot, typeURL string, into map[string]T) {
	set := s.Set(typeURL)
	for _, n := range set.Names() {
		if m, ok := set.Get(n).Message.(T); ok {
			into[n] = m
		}
	}
}

// Result is where a request goes. Fields are set as far as the request got:
// a request no virtual host takes has a listener and no route.
type Result struct {
	Request  Request        `json:"request"`
	Listener *ListenerMatch `json:"listener,omitempty"`
	// RouteConfig is the RouteConfiguration used; RouteConfigFrom is "rds"
	// or "inline".
	RouteConfig     string      `json:"routeConfig,omitempty"`
	RouteConfigFrom string      `json:"routeConfigFrom,omitempty"`
	VirtualHost     *VHostMatch `json:"virtualHost,omitempty"`
	Route           *RouteRef   `json:"route,omitempty"`
	// Action is "route", "redirect", "direct_response", "tcp_proxy", or
	// "none" when no route takes the request.
	Action   string          `json:"action"`
	Clusters []ClusterShare  `json:"clusters,omitempty"`
	Redirect *RedirectResult `json:"redirect,omitempty"`
	Direct   *DirectResult   `json:"directResponse,omitempty"`
	// Status is the HTTP status the proxy answers itself: a direct
	// response's, a redirect's, 404 when no virtual host or route takes
	// the request, 503 when its cluster does not exist. 0: forwarded.
	Status uint32 `json:"status,omitempty"`
	// GRPCStatus is, for a proxyless gRPC call that fails in the client,
	// the status code name it fails with.
	GRPCStatus string `json:"grpcStatus,omitempty"`
	// GRPCNACK is, for a proxyless gRPC call, why a gRPC client rejects
	// (NACKs) the api_listener or the route configuration the call is
	// routed with: the whole resource is refused, and the client keeps the
	// version it last ACKed, not the one explained. Empty when it accepts
	// both.
	GRPCNACK []string `json:"grpcNack,omitempty"`
	// GRPCClients are, for a proxyless gRPC call, the client
	// implementations it is explained for (CheckClient): whether what each
	// fetches passes its rules, and what it does with the call.
	GRPCClients []*ClientCheck `json:"grpcClients,omitempty"`
	// Outcome says in a line what happens.
	Outcome string `json:"outcome"`
	// NotSimulated lists what in the path of this request the engine does
	// not model, and how it treated it.
	NotSimulated []string `json:"notSimulated,omitempty"`
}

// ListenerMatch is the listener and filter chain that take the request.
type ListenerMatch struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Port    uint32 `json:"port,omitempty"`
	// How is how the listener was found ("port 443 (https's default)",
	// "by name", "api_listener of target greeter").
	How         string `json:"how"`
	FilterChain string `json:"filterChain,omitempty"`
	// ChainMatch says what the filter chain's filter_chain_match matched
	// ("matched on server name shop.example.com"), or why the default
	// chain was taken.
	ChainMatch string `json:"chainMatch,omitempty"`
}

// VHostMatch is the virtual host that takes the request and the domain
// that matched, with its kind (exact, suffix wildcard, prefix wildcard,
// any).
type VHostMatch struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
	Kind   string `json:"kind"`
	// Host is the host the domains were matched against.
	Host string `json:"host"`
}

// RouteRef is the route that takes the request: its name, or "#N" for the
// N-th (from 0) route of the virtual host when it has none.
type RouteRef struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	// Match describes the route's match as written.
	Match string `json:"match"`
}

// ClusterShare is a cluster the request may go to and its share of the
// route's traffic (1 for a single cluster).
type ClusterShare struct {
	Name   string  `json:"name"`
	Weight uint32  `json:"weight,omitempty"`
	Share  float64 `json:"share"`
	// Missing: the cluster does not exist on the node.
	Missing bool   `json:"missing,omitempty"`
	Type    string `json:"type,omitempty"`
	// ServingPriority is the priority level traffic goes to: the lowest
	// with a healthy (or unknown-health) endpoint; -1 when none has one.
	ServingPriority int        `json:"servingPriority"`
	Endpoints       []Endpoint `json:"endpoints,omitempty"`
}

// Endpoint is one endpoint of a cluster.
type Endpoint struct {
	Address        string `json:"address"`
	Region         string `json:"region,omitempty"`
	Zone           string `json:"zone,omitempty"`
	SubZone        string `json:"subZone,omitempty"`
	Priority       uint32 `json:"priority"`
	Health         string `json:"health"`
	Weight         uint32 `json:"weight"`
	LocalityWeight uint32 `json:"localityWeight,omitempty"`
	// Serving: healthy (or unknown) at the serving priority.
	Serving bool `json:"serving"`
}

// RedirectResult is the redirect the proxy answers with.
type RedirectResult struct {
	Location string `json:"location"`
	Code     uint32 `json:"code"`
}

// DirectResult is the response the proxy answers with itself.
type DirectResult struct {
	Status uint32 `json:"status"`
	Body   string `json:"body,omitempty"`
}

// routeID is a route's name, or its index when it has none.
func routeID(r *routev3.Route, i int) string {
	if r.GetName() != "" {
		return r.GetName()
	}
	return fmt.Sprintf("#%d", i)
}
