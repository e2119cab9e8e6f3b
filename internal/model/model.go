// Package model holds Pylon's resolved model: plain, immutable data with no
// I/O and no Envoy types: the services, routes, listeners and secrets a
// config describes. The node groups it is served to are nodegroup's.
package model

import "github.com/pylon-xds/pylon/internal/nodegroup"

// Source is where an object was written, for diagnostics.
type Source struct {
	File string
	Line int
}

// Service is an upstream: an EDS cluster and its endpoints.
type Service struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Protocol is http1 (default), http2, grpc or tcp.
	Protocol string `json:"protocol,omitempty"`
	// LB is round_robin (default), least_request, random, ring_hash or
	// maglev; for proxyless gRPC clients also pick_first, wrr_locality and
	// weighted_round_robin.
	LB string `json:"lb,omitempty"`
	// WRR tunes lb: weighted_round_robin (gRFC A58).
	WRR            *WeightedRoundRobin `json:"weighted_round_robin,omitempty"`
	ConnectTimeout *nodegroup.Duration `json:"connect_timeout,omitempty"`
	Endpoints      []Endpoint          `json:"endpoints"`
	// Type is eds (default: the endpoints served over EDS) or logical_dns:
	// the one endpoint's host name, which the clients resolve themselves
	// (gRFC A37).
	Type string `json:"type,omitempty"`
	// Aggregate, when set, makes the service an aggregate cluster of these
	// services in priority order: RPCs go to the first with a healthy
	// endpoint (gRFC A37). Such a service has no endpoints of its own.
	Aggregate      []string          `json:"aggregate,omitempty"`
	CircuitBreaker *CircuitBreaker   `json:"circuit_breakers,omitempty"`
	HealthCheck    *HealthCheck      `json:"health_check,omitempty"`
	Outlier        *OutlierDetection `json:"outlier_detection,omitempty"`
	TLS            *UpstreamTLS      `json:"tls,omitempty"`
	Source         Source            `json:"-"`

	// TrafficDistribution PreferClose (or PreferSameZone, the same) serves
	// a node group whose match pins a zone that zone's endpoints first,
	// at priority 0, and the others after them, as a fallback
	// (Kubernetes' spec.trafficDistribution).
	TrafficDistribution string `json:"traffic_distribution,omitempty"`
}

// WeightedRoundRobin is client-side weighted round robin (gRFC A58): each
// endpoint weighted by the queries per second it reports over ORCA,
// divided by its utilization (plus ErrorUtilizationPenalty times its
// errors per query). Unset fields take the clients' defaults: a weight
// counts BlackoutPeriod (10s) after an endpoint's first report, lapses
// WeightExpirationPeriod (3m) after its last, and the weights are
// recomputed every WeightUpdatePeriod (1s); penalty 1.
type WeightedRoundRobin struct {
	BlackoutPeriod          *nodegroup.Duration `json:"blackout_period,omitempty"`
	WeightExpirationPeriod  *nodegroup.Duration `json:"weight_expiration_period,omitempty"`
	WeightUpdatePeriod      *nodegroup.Duration `json:"weight_update_period,omitempty"`
	ErrorUtilizationPenalty *float64            `json:"error_utilization_penalty,omitempty"`
}

// Endpoint is one instance of a service.
type Endpoint struct {
	Address  string `json:"address"`
	Port     uint32 `json:"port"`
	Weight   uint32 `json:"weight,omitempty"`
	Region   string `json:"region,omitempty"`
	Zone     string `json:"zone,omitempty"`
	SubZone  string `json:"sub_zone,omitempty"`
	Priority uint32 `json:"priority,omitempty"`
	// Health is healthy, unhealthy, draining or unknown (default).
	Health string `json:"health,omitempty"`
}

// CircuitBreaker holds the default-priority thresholds.
type CircuitBreaker struct {
	MaxConnections     uint32 `json:"max_connections,omitempty"`
	MaxPendingRequests uint32 `json:"max_pending_requests,omitempty"`
	MaxRequests        uint32 `json:"max_requests,omitempty"`
	MaxRetries         uint32 `json:"max_retries,omitempty"`
}

// HealthCheck is an active health check: HTTP when Path is set, else TCP.
type HealthCheck struct {
	Path               string              `json:"path,omitempty"`
	Interval           *nodegroup.Duration `json:"interval,omitempty"`
	Timeout            *nodegroup.Duration `json:"timeout,omitempty"`
	UnhealthyThreshold uint32              `json:"unhealthy_threshold,omitempty"`
	HealthyThreshold   uint32              `json:"healthy_threshold,omitempty"`
}

// OutlierDetection ejects hosts that keep failing.
type OutlierDetection struct {
	Consecutive5xx     uint32              `json:"consecutive_5xx,omitempty"`
	Interval           *nodegroup.Duration `json:"interval,omitempty"`
	BaseEjectionTime   *nodegroup.Duration `json:"base_ejection_time,omitempty"`
	MaxEjectionPercent uint32              `json:"max_ejection_percent,omitempty"`
	// FailurePercentage ejects a host whose share of failed requests
	// reaches a threshold; the detection proxyless gRPC implements (gRFC
	// A50), with success rate, and Envoy too.
	FailurePercentage *FailurePercentage `json:"failure_percentage,omitempty"`
}

// FailurePercentage is failure-percentage ejection: a host with at least
// RequestVolume requests in an interval, of a cluster with at least
// MinimumHosts such hosts, is ejected when Threshold percent or more of
// its requests failed. Zero values take Envoy's and gRPC's defaults (85,
// 5, 50).
type FailurePercentage struct {
	Threshold     uint32 `json:"threshold,omitempty"`
	MinimumHosts  uint32 `json:"minimum_hosts,omitempty"`
	RequestVolume uint32 `json:"request_volume,omitempty"`
}

// UpstreamTLS makes the service's connections TLS, with secrets by name.
type UpstreamTLS struct {
	SNI string `json:"sni,omitempty"`
	// CA names a secret holding the CA to verify the service with.
	CA string `json:"ca,omitempty"`
	// ClientCert names a secret holding the client certificate and key.
	ClientCert string `json:"client_cert,omitempty"`
	// Provider, for proxyless gRPC clients instead of CA and ClientCert,
	// names the certificate provider instance of their bootstrap that
	// holds the CA verifying the service and their own certificate (gRFC
	// A29).
	Provider string `json:"provider,omitempty"`
}

// RouteTable is a RouteConfiguration: virtual hosts of ordered routes.
type RouteTable struct {
	Name         string        `json:"name"`
	VirtualHosts []VirtualHost `json:"virtual_hosts"`
	Source       Source        `json:"-"`
}

// VirtualHost is a set of domains and their routes, tried in order.
type VirtualHost struct {
	Name    string   `json:"name"`
	Domains []string `json:"domains"`
	Routes  []Route  `json:"routes"`
}

// Route is one match and what to do with it: exactly one of To, Redirect
// and Direct.
type Route struct {
	Match    RouteMatch          `json:"match"`
	To       []Target            `json:"to,omitempty"`
	Redirect *Redirect           `json:"redirect,omitempty"`
	Direct   *Direct             `json:"direct,omitempty"`
	Timeout  *nodegroup.Duration `json:"timeout,omitempty"`
	Retries  *Retries            `json:"retries,omitempty"`
	Request  *Headers            `json:"request_headers,omitempty"`
	Response *Headers            `json:"response_headers,omitempty"`
	Limit    *RateLimit          `json:"rate_limit,omitempty"`
}

// RouteMatch is the request a route takes: one of Prefix, Path and Regex
// (default prefix "/"), and optionally headers and a method.
type RouteMatch struct {
	Prefix  *string       `json:"prefix,omitempty"`
	Path    string        `json:"path,omitempty"`
	Regex   string        `json:"regex,omitempty"`
	Headers []HeaderMatch `json:"headers,omitempty"`
	Method  string        `json:"method,omitempty"`
}

// HeaderMatch matches one header: exactly, by prefix, by regex, or present.
type HeaderMatch struct {
	Name    string `json:"name"`
	Exact   string `json:"exact,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	Regex   string `json:"regex,omitempty"`
	Present bool   `json:"present,omitempty"`
}

// Target is a service and its share of the traffic.
type Target struct {
	Service string `json:"service"`
	Weight  uint32 `json:"weight,omitempty"`
}

// Redirect answers with a redirect.
type Redirect struct {
	Host  string `json:"host,omitempty"`
	Path  string `json:"path,omitempty"`
	HTTPS bool   `json:"https,omitempty"`
	Code  uint32 `json:"code,omitempty"` // 301 (default), 302, 303, 307, 308
}

// Direct answers with a fixed response.
type Direct struct {
	Status uint32 `json:"status"`
	Body   string `json:"body,omitempty"`
}

// Retries is a retry policy.
type Retries struct {
	On            string              `json:"on,omitempty"` // Envoy's retry_on, default "5xx,reset,connect-failure"
	Attempts      uint32              `json:"attempts,omitempty"`
	PerTryTimeout *nodegroup.Duration `json:"per_try_timeout,omitempty"`
}

// Headers adds (overwriting) and removes headers.
type Headers struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// RateLimit is a local token bucket for a route: Requests per Per.
type RateLimit struct {
	Requests uint32              `json:"requests"`
	Per      *nodegroup.Duration `json:"per,omitempty"` // default 1s
}

// Listener is where a proxy accepts connections.
type Listener struct {
	Name     string `json:"name"`
	Address  string `json:"address,omitempty"` // default 0.0.0.0
	Port     uint32 `json:"port"`
	Protocol string `json:"protocol,omitempty"` // http (default) or tcp
	// Routes names the route table of an HTTP listener (sent over RDS).
	Routes string `json:"routes,omitempty"`
	// Service is where a TCP listener proxies to.
	Service string `json:"service,omitempty"`
	// TLS terminates TLS with the named certificate secret.
	TLS *ListenerTLS `json:"tls,omitempty"`
	// SNI adds filter chains by server name, each with its own certificate
	// and, for HTTP, its own route table.
	SNI    []SNIChain `json:"sni,omitempty"`
	Source Source     `json:"-"`
}

// ListenerTLS is TLS termination.
type ListenerTLS struct {
	Secret string `json:"secret"`
}

// SNIChain is a filter chain for some server names.
type SNIChain struct {
	Names  []string `json:"names"`
	Secret string   `json:"secret"`
	Routes string   `json:"routes,omitempty"`
}

// Secret is TLS material from files: a certificate and key, or a CA.
type Secret struct {
	Name     string `json:"name"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	CAFile   string `json:"ca_file,omitempty"`
	// Identities, when set, are glob patterns of the verified identities
	// that may receive the secret (nodegroup.AnyMatch); empty: every verified
	// node of a group that holds it.
	Identities []string `json:"identities,omitempty"`
	Source     Source   `json:"-"`
}

// GRPCTarget exposes services to proxyless gRPC clients as xds:///Target.
// Routes are tried in order, first match wins; To, when set, is the last
// route and takes every RPC no earlier route took. Timeout and Retries are
// the defaults of every route that sets none of its own.
type GRPCTarget struct {
	Target  string              `json:"target"`
	To      []Target            `json:"to,omitempty"`
	Routes  []GRPCRoute         `json:"routes,omitempty"`
	Timeout *nodegroup.Duration `json:"timeout,omitempty"`
	Retries *GRPCRetries        `json:"retries,omitempty"`
	// Hash is what a ring_hash service hashes an RPC on (gRFC A42): the
	// default of every route without its own.
	Hash *GRPCHash `json:"hash,omitempty"`
	// Fault is the fault injected into RPCs (gRFC A33): the default of
	// every route without its own.
	Fault *GRPCFault `json:"fault,omitempty"`
	// Server, when set, is the target's xDS-enabled gRPC servers (gRFC
	// A36): the Listener they fetch for the address they serve on.
	Server *GRPCServer `json:"server,omitempty"`
	Source Source      `json:"-"`
}

// GRPCServer is what the xDS-enabled gRPC servers of a target fetch: the
// address they listen on (host:port as they pass it to Serve, e.g.
// 0.0.0.0:50051), their TLS (gRFC A29) and who may call them (gRFC A41).
// Groups, when set, names the node groups whose nodes are the servers:
// the Listener goes to them alone. Unset, it goes where the groups' scopes
// take it (an unscoped group, an Envoy group's too, receives it).
type GRPCServer struct {
	Listen string         `json:"listen"`
	Groups []string       `json:"groups,omitempty"`
	TLS    *GRPCServerTLS `json:"tls,omitempty"`
	RBAC   *GRPCRBAC      `json:"rbac,omitempty"`
}

// GRPCServerTLS is a server's TLS from the certificate provider instances
// its bootstrap names: Certificates (default "default") for its own
// certificate, CA (default: Certificates) for the clients'. Clients must
// present a certificate unless RequireClientCertificate is false.
type GRPCServerTLS struct {
	Certificates             string `json:"certificates,omitempty"`
	CA                       string `json:"ca,omitempty"`
	RequireClientCertificate *bool  `json:"require_client_certificate,omitempty"`
}

// GRPCRBAC says who may call a target's servers: an RPC that a Deny
// policy matches is refused; with Allow set, so is one that no Allow
// policy matches.
type GRPCRBAC struct {
	Allow []GRPCPolicy `json:"allow,omitempty"`
	Deny  []GRPCPolicy `json:"deny,omitempty"`
}

// GRPCPolicy matches an RPC whose caller is one of Principals (empty: any
// caller), whose method is one of Methods (empty: any) and whose metadata
// matches every one of Headers. A principal is the identity of the
// caller's certificate (a URI SAN such as a SPIFFE id, else a DNS SAN, else
// the subject), exact or, ending in "*", by prefix; "*" is any caller with
// a certificate. A method is "/pkg.Service/Method" or "/pkg.Service/*".
type GRPCPolicy struct {
	Name       string        `json:"name"`
	Principals []string      `json:"principals,omitempty"`
	Methods    []string      `json:"methods,omitempty"`
	Headers    []HeaderMatch `json:"headers,omitempty"`
}

// GRPCFault delays or aborts a share of the RPCs a route takes, in the
// client, before they leave it.
type GRPCFault struct {
	Delay *GRPCDelay `json:"delay,omitempty"`
	Abort *GRPCAbort `json:"abort,omitempty"`
}

// GRPCDelay holds Percent of RPCs (default 100) for Delay.
type GRPCDelay struct {
	Delay   *nodegroup.Duration `json:"delay"`
	Percent *uint32             `json:"percent,omitempty"`
}

// GRPCAbort fails Percent of RPCs (default 100) with Status, a status
// code's name in lowercase ("unavailable", "resource-exhausted").
type GRPCAbort struct {
	Status  string  `json:"status"`
	Percent *uint32 `json:"percent,omitempty"`
}

// GRPCHash picks a ring hash backend for an RPC by one of: the value of a
// metadata key (RPCs without it hash at random), or the client channel
// (every RPC of a channel to one backend).
type GRPCHash struct {
	Header  string `json:"header,omitempty"`
	Channel bool   `json:"channel,omitempty"`
}

// GRPCRoute sends the RPCs it matches to its services.
type GRPCRoute struct {
	Match   GRPCMatch           `json:"match"`
	To      []Target            `json:"to"`
	Timeout *nodegroup.Duration `json:"timeout,omitempty"`
	Retries *GRPCRetries        `json:"retries,omitempty"`
	Hash    *GRPCHash           `json:"hash,omitempty"`
	Fault   *GRPCFault          `json:"fault,omitempty"`
}

// GRPCMatch is the RPCs a route takes: by method path ("/pkg.Service/
// Method"), one of Prefix, Path and Regex (default: every path), and by
// request metadata.
type GRPCMatch struct {
	Prefix  *string       `json:"prefix,omitempty"`
	Path    string        `json:"path,omitempty"`
	Regex   string        `json:"regex,omitempty"`
	Headers []HeaderMatch `json:"headers,omitempty"`
}

// GRPCRetries is a gRPC retry policy (gRFC A44): the status codes to
// retry on, how many retries after the first attempt, and the exponential
// backoff between them.
type GRPCRetries struct {
	On           []string            `json:"on"`
	NumRetries   uint32              `json:"num_retries,omitempty"`   // default 1
	BaseInterval *nodegroup.Duration `json:"base_interval,omitempty"` // default 25ms
	MaxInterval  *nodegroup.Duration `json:"max_interval,omitempty"`  // default 10 x base
}

// Model is the high-level part of a config.
type Model struct {
	Services  []Service
	Routes    []RouteTable
	Listeners []Listener
	Secrets   []Secret
	GRPC      []GRPCTarget
}
