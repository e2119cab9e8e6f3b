package config

// MaxRouteTests bounds the route tests of one configuration: each runs
// against its node's resources on every change, so the count bounds the
// work a change costs (a thousand cases over a few thousand routes take
// well under a second).
const MaxRouteTests = 1000

// RouteTest is a route test as written under `tests:` (docs/route-tests.md):
// a request, the node or group it is sent on, and what must happen to it.
type RouteTest struct {
	Name string `json:"name"`
	// Node is the node the request reaches, put in its group by the group
	// rules as the server does; Group names the group instead. With
	// neither, the config must have one group (or none).
	Node    *TestNode   `json:"node,omitempty"`
	Group   string      `json:"group,omitempty"`
	Request TestRequest `json:"request"`
	Expect  TestExpect  `json:"expect"`

	File string `json:"-"`
	Line int    `json:"-"`
}

// TestNode is what group rules match on.
type TestNode struct {
	ID       string            `json:"id"`
	Cluster  string            `json:"cluster,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Region   string            `json:"region,omitempty"`
	Zone     string            `json:"zone,omitempty"`
	SubZone  string            `json:"sub_zone,omitempty"`
	// Identities are what the node's verified client certificate proves
	// (SPIFFE ID, DNS SANs), for groups that admit by identity.
	Identities []string `json:"identities,omitempty"`
}

// TestRequest is the request: a URL (http://, https:// or, for proxyless
// gRPC, xds:///target/pkg.Service/Method), the method (default GET),
// headers, and optionally the destination port, the listener by name and
// the TLS server name.
type TestRequest struct {
	Method   string            `json:"method,omitempty"`
	URL      string            `json:"url"`
	Headers  map[string]string `json:"headers,omitempty"`
	Port     uint32            `json:"port,omitempty"`
	Listener string            `json:"listener,omitempty"`
	SNI      string            `json:"sni,omitempty"`
}

// TestExpect is what must happen; every field set is checked.
type TestExpect struct {
	Listener    string `json:"listener,omitempty"`
	FilterChain string `json:"filter_chain,omitempty"`
	VirtualHost string `json:"virtual_host,omitempty"`
	// Route is the route's name, or "#N" for the N-th route (from 0) of
	// its virtual host.
	Route string `json:"route,omitempty"`
	// Cluster: the request goes to this cluster alone.
	Cluster string `json:"cluster,omitempty"`
	// Clusters: a weighted split, cluster to weight; compared as shares,
	// so {a: 9, b: 1} and {a: 90, b: 10} say the same.
	Clusters map[string]uint32 `json:"clusters,omitempty"`
	// Redirect is the Location of a redirect.
	Redirect string `json:"redirect,omitempty"`
	// Status is what the proxy answers itself: a direct response's or a
	// redirect's status, 404 when no virtual host or route matches, 503
	// when the cluster does not exist.
	Status uint32 `json:"status,omitempty"`
	// GRPCStatus is the status a proxyless gRPC call fails with in the
	// client ("UNAVAILABLE").
	GRPCStatus string `json:"grpc_status,omitempty"`
	// Unreachable: the request reaches no listener, or no filter chain
	// takes its connection.
	Unreachable bool `json:"unreachable,omitempty"`
}
