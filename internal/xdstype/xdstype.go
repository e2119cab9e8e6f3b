// Package xdstype is the registry of the xDS resource types Pylon serves.
//
// Every type-specific rule lives here, in one entry per type: the Go message,
// the names used in logs and CLIs, whether the type takes a wildcard
// subscription, whether a state-of-the-world response must carry the whole
// set, the make-before-break rank, the gRPC service that serves it, and how to
// read a resource's name and the names it refers to. Adding a type is adding
// one entry; the server, the snapshot builder and the config loader need no
// change.
package xdstype

import (
	"sort"

	"google.golang.org/protobuf/proto"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
)

// Type URLs of the resource types Pylon serves.
const (
	ListenerURL      = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteURL         = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	ScopedRouteURL   = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
	VirtualHostURL   = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
	ClusterURL       = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointURL      = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	SecretURL        = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	RuntimeURL       = "type.googleapis.com/envoy.service.runtime.v3.Runtime"
	ExtensionConfURL = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
)

// Ref is a reference from one resource to another, found at Field.
type Ref struct {
	TypeURL string
	Name    string
	Field   string // path inside the referring resource, e.g. "virtual_hosts[0].routes[2].route.cluster"
	// Accept, when set, lists the types the referred resource's payload
	// may have: for a TypedExtensionConfig, the referring filter's
	// config_discovery.type_urls, found at AcceptField. Envoy rejects an
	// extension config of any other type.
	Accept      []string
	AcceptField string
	// Optional is set when the client does not need the resource to
	// exist: an ECDS filter with a default it applies without warming.
	Optional bool
}

// Type describes one xDS resource type.
type Type struct {
	URL    string // type URL, e.g. ListenerURL
	Kind   string // message name, e.g. "Listener"
	Abbrev string // xDS service abbreviation, e.g. "LDS"
	Plural string // the config's word for a list of them, e.g. "listeners"

	// New returns an empty message of the type.
	New func() proto.Message
	// Refs lists the resources a message names that Pylon must serve too.
	Refs func(proto.Message) []Ref

	// Wildcard is true when an empty first state-of-the-world request (the
	// legacy wildcard) means "everything" for this type.
	Wildcard bool
	// FullState is true when a state-of-the-world response must carry every
	// subscribed resource, absence meaning deletion: Listener and Cluster
	// (xDS spec), and ScopedRouteConfiguration (Envoy's SRDS client).
	FullState bool
	// Rank orders types on ADS for make-before-break: lower ranks are sent
	// first, removals go in reverse.
	Rank int
	// Sensitive marks types whose payloads must be redacted in dumps.
	Sensitive bool
	// MustPrecede is set for types whose resources are used by name
	// without warming: a route or TCP proxy naming a cluster sends traffic
	// to it at once, while a cluster waits for its assignment and a
	// listener for its routes and secrets. A resource of this type must
	// reach a client before anything naming it, and leave after (X39).
	MustPrecede bool

	// Service is the full gRPC service name serving the type on its own
	// stream; SotWMethod and DeltaMethod are its streaming methods ("" when
	// the variant does not exist, as for VHDS in state of the world).
	Service     string
	SotWMethod  string
	DeltaMethod string
}

// NameOf returns the resource name of m: "name" for most types and
// "cluster_name" for ClusterLoadAssignment.
func NameOf(m proto.Message) string {
	switch v := m.(type) {
	case *endpointv3.ClusterLoadAssignment:
		return v.GetClusterName()
	case interface{ GetName() string }:
		return v.GetName()
	}
	return ""
}

// NameField is the proto field holding the name of a message of the type.
func (t *Type) NameField() string {
	if t.URL == EndpointURL {
		return "cluster_name"
	}
	return "name"
}

// Registry is an immutable set of types.
type Registry struct {
	byURL  map[string]*Type
	ranked []*Type
}

// New returns the registry of every type Pylon serves.
func New() *Registry {
	types := []*Type{
		{
			URL: RuntimeURL, Kind: "Runtime", Plural: "runtimes", Abbrev: "RTDS", Rank: 0,
			New:     func() proto.Message { return &runtimev3.Runtime{} },
			Service: "envoy.service.runtime.v3.RuntimeDiscoveryService", SotWMethod: "StreamRuntime", DeltaMethod: "DeltaRuntime",
		},
		{
			URL: SecretURL, Kind: "Secret", Plural: "secrets", Abbrev: "SDS", Rank: 1, Sensitive: true,
			New:     func() proto.Message { return &tlsv3.Secret{} },
			Service: "envoy.service.secret.v3.SecretDiscoveryService", SotWMethod: "StreamSecrets", DeltaMethod: "DeltaSecrets",
		},
		{
			URL: ClusterURL, Kind: "Cluster", Plural: "clusters", Abbrev: "CDS", Rank: 2, Wildcard: true, FullState: true, MustPrecede: true,
			New: func() proto.Message { return &clusterv3.Cluster{} }, Refs: clusterRefs,
			Service: "envoy.service.cluster.v3.ClusterDiscoveryService", SotWMethod: "StreamClusters", DeltaMethod: "DeltaClusters",
		},
		{
			URL: EndpointURL, Kind: "ClusterLoadAssignment", Plural: "endpoints", Abbrev: "EDS", Rank: 3,
			New:     func() proto.Message { return &endpointv3.ClusterLoadAssignment{} },
			Service: "envoy.service.endpoint.v3.EndpointDiscoveryService", SotWMethod: "StreamEndpoints", DeltaMethod: "DeltaEndpoints",
		},
		{
			// ECDS before the listeners (and clusters' filters) naming it:
			// a listener warms until its filter configs arrive, and one
			// already subscribed gets the new config before the listener
			// that needs it. Not MustPrecede: nothing uses it unwarmed.
			URL: ExtensionConfURL, Kind: "TypedExtensionConfig", Plural: "extension_configs", Abbrev: "ECDS", Rank: 4,
			New:     func() proto.Message { return &corev3.TypedExtensionConfig{} },
			Service: "envoy.service.extension.v3.ExtensionConfigDiscoveryService", SotWMethod: "StreamExtensionConfigs", DeltaMethod: "DeltaExtensionConfigs",
		},
		{
			URL: ListenerURL, Kind: "Listener", Plural: "listeners", Abbrev: "LDS", Rank: 5, Wildcard: true, FullState: true,
			New: func() proto.Message { return &listenerv3.Listener{} }, Refs: listenerRefs,
			Service: "envoy.service.listener.v3.ListenerDiscoveryService", SotWMethod: "StreamListeners", DeltaMethod: "DeltaListeners",
		},
		{
			// SRDS comes after the listeners that use it and before the
			// route configurations its scopes name, as RDS after LDS: the
			// listener warms on its scopes, the scopes on their routes.
			// Envoy subscribes to every scope (wildcard) and, in state of
			// the world, drops each scope a response leaves out
			// (ScopedRdsConfigSubscription::onConfigUpdate in
			// source/common/router/scoped_rds.cc): full state, like LDS.
			URL: ScopedRouteURL, Kind: "ScopedRouteConfiguration", Plural: "scoped_routes", Abbrev: "SRDS", Rank: 6, Wildcard: true, FullState: true,
			New: func() proto.Message { return &routev3.ScopedRouteConfiguration{} }, Refs: scopedRouteRefs,
			Service: "envoy.service.route.v3.ScopedRoutesDiscoveryService", SotWMethod: "StreamScopedRoutes", DeltaMethod: "DeltaScopedRoutes",
		},
		{
			URL: RouteURL, Kind: "RouteConfiguration", Plural: "routes", Abbrev: "RDS", Rank: 7,
			New: func() proto.Message { return &routev3.RouteConfiguration{} }, Refs: routeConfigRefs,
			Service: "envoy.service.route.v3.RouteDiscoveryService", SotWMethod: "StreamRoutes", DeltaMethod: "DeltaRoutes",
		},
		{
			URL: VirtualHostURL, Kind: "VirtualHost", Plural: "virtual_hosts", Abbrev: "VHDS", Rank: 8,
			New: func() proto.Message { return &routev3.VirtualHost{} }, Refs: virtualHostRefs,
			// VHDS exists only as a delta service.
			Service: "envoy.service.route.v3.VirtualHostDiscoveryService", DeltaMethod: "DeltaVirtualHosts",
		},
	}
	r := &Registry{byURL: make(map[string]*Type, len(types)), ranked: types}
	for _, t := range types {
		r.byURL[t.URL] = t
	}
	sort.SliceStable(r.ranked, func(i, j int) bool { return r.ranked[i].Rank < r.ranked[j].Rank })
	return r
}

// Lookup returns the type with the given URL, or nil.
func (r *Registry) Lookup(url string) *Type { return r.byURL[url] }

// ByPlural returns the type whose Plural is p, or nil.
func (r *Registry) ByPlural(p string) *Type {
	for _, t := range r.ranked {
		if t.Plural == p {
			return t
		}
	}
	return nil
}

// Ranked returns every type in make-before-break order. The slice is shared:
// do not modify it.
func (r *Registry) Ranked() []*Type { return r.ranked }
