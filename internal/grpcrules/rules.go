// Package grpcrules is what proxyless gRPC clients accept of xDS resources:
// one table of the rules by which each client implementation NACKs a
// resource (or accepts one it can never use), read from the clients' own
// parsers at the versions in Versions, and Check, which applies them to one
// resource for the clients a node group serves. It sees Envoy's messages
// only; the caller names the file, the line and the group.
package grpcrules

import (
	"slices"
	"strings"
)

// Client is a gRPC implementation with an xDS client.
type Client string

// The clients Pylon knows the rules of, as a group's `clients:` names them.
const (
	Go   Client = "grpc-go"   // grpc-go
	Core Client = "grpc-core" // gRPC C-core: C++, Python, Ruby, PHP
	JS   Client = "grpc-js"   // grpc-js with @grpc/grpc-js-xds
)

// All is every client, in the order messages name them.
var All = []Client{Go, Core, JS}

// Versions are the releases each client's rules were read from, and which
// test/integration (grpc-go) and test/interop (C-core, grpc-js) run.
var Versions = map[Client]string{
	Go:   "grpc-go v1.85.0",
	Core: "C-core 1.51.1 (Debian's python3-grpcio)",
	JS:   "@grpc/grpc-js 1.14.7 with @grpc/grpc-js-xds 1.14.1",
}

// Parse reads a client's name as a group states it.
func Parse(name string) (Client, bool) {
	c := Client(name)
	return c, slices.Contains(All, c)
}

// Names are the clients' names, for messages.
func Names() []string {
	out := make([]string, len(All))
	for i, c := range All {
		out[i] = string(c)
	}
	return out
}

// Effect is what a client does with a resource a rule finds.
type Effect string

const (
	// NACK: the client rejects the resource and keeps the one it had (or,
	// with none, has no configuration for the name).
	NACK Effect = "NACK"
	// Unusable: the client accepts the resource but fails every RPC that
	// reaches the part a rule names.
	Unusable Effect = "fails RPCs"
	// Ignored: the client accepts the resource and does not do what the
	// field a rule names says (it balances otherwise, say).
	Ignored Effect = "ignores it"
	// Crash: the client accepts the resource and its process dies; what
	// test/interop saw of a client at the version in Versions.
	Crash Effect = "crashes"
)

// Rule is one reason a gRPC client refuses a resource.
type Rule struct {
	ID   string
	Type string // the resource's kind: Listener, RouteConfiguration, Cluster, ClusterLoadAssignment
	// Clients are the clients the rule holds for. Where clients differ on
	// a value (an LB policy, an HTTP filter), the rule holds for those
	// that lack it; Check says which.
	Clients []Client
	Effect  Effect
	// What is the rule, as docs/grpc.md shows it.
	What string
}

// Rules is the table: every rule Check applies, one place. The rules follow
// grpc-go v1.85.0's internal/xds/xdsclient/xdsresource (unmarshal_lds.go,
// unmarshal_rds.go, unmarshal_cds.go), gRPC's doc/grpc_xds_features.md for
// what C-core and grpc-js implement, and the gRFCs they cite (A27, A28,
// A29, A37, A39, A42, A44, A48). What Envoy's own validation refuses for
// every client (least_request's choice_count under 2, say) is not repeated
// here.
var Rules = []Rule{
	{"listener-kind", "Listener", All, NACK, "a Listener is a client's (api_listener) or an xDS-enabled server's (address); neither is refused"},
	{"server-listener", "Listener", []Client{Go}, NACK, "an xDS-enabled server's Listener has a socket_address, no listener_filters and no use_original_dst (A36; only grpc-go's servers are run here)"},
	{"server-filter-chains", "Listener", []Client{Go}, NACK, "a server's Listener has a default_filter_chain or a filter chain the server keeps (it drops those matching destination_port, server_names, application_protocols or a transport_protocol other than raw_buffer), and no two with the same match"},
	{"server-network-filters", "Listener", []Client{Go}, NACK, "each of a server's filter chains has an HttpConnectionManager, and only network filters named once each that are HttpConnectionManagers"},
	{"server-tls", "Listener", []Client{Go}, NACK, "a server's transport_socket is envoy.transport_sockets.tls with a DownstreamTlsContext: its certificate (and, when it requires client certificates, its CA) from certificate provider instances (A29), no require_sni, LENIENT_STAPLING, no match_subject_alt_names"},
	{"server-rbac", "Listener", []Client{Go}, NACK, "a server's RBAC policies have no condition or checked_condition and no header matcher on :scheme or a grpc- name (A41)"},
	{"server-route-action", "Listener", []Client{Go}, Unusable, "a server's routes are non_forwarding_action: it fails the RPCs another action matches with UNAVAILABLE (A36)"},
	{"listener-hcm", "Listener", All, NACK, "the api_listener is an HttpConnectionManager"},
	{"hcm-routes", "Listener", All, NACK, "the HttpConnectionManager has rds (from ADS or self) or an inline route_config; scoped routes are not implemented"},
	{"hcm-unsupported-value", "Listener", []Client{Go}, NACK, "xff_num_trusted_hops is zero and original_ip_detection_extensions empty"},
	{"hcm-filter-unknown", "Listener", All, NACK, "every HTTP filter that is not is_optional is one the client implements on its side (client: router, fault, and in grpc-go gcp_authn; server: router, rbac)"},
	{"hcm-router-last", "Listener", All, NACK, "the filters the client keeps are not empty and end with the router, and only there (A39)"},
	{"route-path", "RouteConfiguration", All, NACK, "every route's match has prefix, path or safe_regex (A28)"},
	{"route-weights", "RouteConfiguration", All, NACK, "weighted_clusters' weights sum to more than zero and at most 2^32-1"},
	{"route-plugin", "RouteConfiguration", All, NACK, "a cluster_specifier_plugin a route names is in the RouteConfiguration"},
	{"route-retry", "RouteConfiguration", All, NACK, "a retry_policy's num_retries, if set, is at least 1, and its back-off intervals above zero (A44)"},
	{"route-action", "RouteConfiguration", []Client{Go, Core}, Unusable, "a client's route has a route action: grpc-go accepts redirect, direct_response and filter_action and fails the RPCs they match with UNAVAILABLE; C-core drops the route, and RPCs it would have taken fail"},
	{"route-action-nack", "RouteConfiguration", []Client{JS}, NACK, "a client's route has a route action: grpc-js NACKs any other (\"unsupported action\")"},
	{"cluster-lb-policy", "Cluster", All, NACK, "lb_policy is one the client implements: ROUND_ROBIN, RING_HASH; LEAST_REQUEST in grpc-go only (A42, A48); a whole CDS response with one such cluster is NACKed"},
	{"cluster-lb-config", "Cluster", []Client{Go, JS}, NACK, "a load_balancing_policy (read in place of lb_policy, A52) lists a policy the client implements, and so do the child lists of those it picks: grpc-go round_robin, ring_hash, pick_first, wrr_locality, least_request, client_side_weighted_round_robin; grpc-js round_robin, wrr_locality (pick_first and weighted round robin only behind environment variables)"},
	{"cluster-lb-config-core", "Cluster", []Client{Core}, Ignored, "C-core 1.51.1 ignores load_balancing_policy and balances by lb_policy: a load_balancing_policy is refused unless it says what lb_policy ROUND_ROBIN does (round_robin, alone or under wrr_locality)"},
	{"cluster-ring-hash", "Cluster", All, NACK, "ring hash uses XX_HASH (A42)"},
	{"cluster-ring-hash-core", "Cluster", []Client{Core}, Unusable, "no RING_HASH for C-core 1.51.1: Debian's python3-grpcio serves no RPC over such a cluster (test/interop saw the RPC wait out its deadline, and the process exit with SIGSEGV)"},
	{"endpoints-locality", "ClusterLoadAssignment", All, NACK, "every group of endpoints has a locality (it may be empty), once per priority, and a priority's locality weights sum to at most 2^32-1"},
	{"endpoints-locality-weight", "ClusterLoadAssignment", All, Unusable, "every group of endpoints has a load_balancing_weight: a group without one is dropped, and its endpoints get no RPCs"},
	{"endpoints-priorities", "ClusterLoadAssignment", All, NACK, "priorities run from 0 without a gap"},
	{"endpoints-duplicate", "ClusterLoadAssignment", All, NACK, "an address and port appears once in an assignment"},
	{"cluster-outlier-defaults", "Cluster", []Client{JS}, Crash, "an outlier_detection with success rate on (it is, unless enforcing_success_rate is 0) states success_rate_minimum_hosts and success_rate_request_volume: grpc-js 1.14 reads them unset as undefined and crashes in its ejection timer"},
	{"cluster-type", "Cluster", All, NACK, "the cluster is EDS (from ADS or self), LOGICAL_DNS or an aggregate cluster (A37); STATIC, STRICT_DNS and ORIGINAL_DST are not implemented"},
	{"cluster-logical-dns", "Cluster", All, NACK, "a LOGICAL_DNS cluster's load_assignment has exactly one locality with one endpoint (A37)"},
	{"cluster-logical-dns-core", "Cluster", []Client{Core}, Crash, "no LOGICAL_DNS for C-core 1.51.1: the process exited with SIGSEGV when an aggregate cluster failed back from its LOGICAL_DNS cluster to its EDS one (test/interop, TestClientsAggregateFailsOverToALogicalDNSService); an aggregate of EDS clusters works"},
	{"cluster-lrs", "Cluster", All, NACK, "lrs_server, if set, is self"},
	{"cluster-tls", "Cluster", All, NACK, "TLS comes from certificate provider instances, not SDS (A29)"},
	{"cluster-socket-matches", "Cluster", []Client{Go}, NACK, "transport_socket_matches is empty (C-core and grpc-js ignore it)"},
}

// rule returns the rule with id; a typo in a check is a programming error.
func rule(id string) *Rule {
	for i := range Rules {
		if Rules[i].ID == id {
			return &Rules[i]
		}
	}
	panic("grpcrules: no rule " + id)
}

// Problem is a rule a resource breaks for some of the clients checked.
type Problem struct {
	Rule *Rule
	// Clients are those of the checked clients that refuse it, in All's
	// order.
	Clients []Client
	// Field is the path of the offending field in the resource, as
	// Pylon's diagnostics name fields.
	Field   string
	Message string
}

// ClientList says clients in prose: "grpc-go", "grpc-go and grpc-js",
// "grpc-go, grpc-core and grpc-js".
func ClientList(clients []Client) string {
	names := make([]string, len(clients))
	for i, c := range clients {
		names[i] = string(c)
	}
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
