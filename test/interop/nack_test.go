package interop

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// rawGreeter is xds:///greeter as raw resources, the way an operator who
// writes Envoy's types would: an API listener, its routes, an EDS cluster.
const rawGreeter = `resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: greeter
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: greeter
      rds: { route_config_name: greeter, config_source: { ads: {}, resource_api_version: V3 } }
      http_filters:
      - name: router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: greeter
  virtual_hosts:
  - name: greeter
    domains: [greeter]
    routes:
    - match: { prefix: "" }
      route: { cluster: greeter-backends }
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: greeter-backends
  type: EDS
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: greeter-backends
  endpoints:
  - locality: { region: interop }
    load_balancing_weight: 1
    lb_endpoints:
    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: BACKEND_PORT } } }
`

// caSecret is a CA for a cluster's TLS over SDS.
const caSecret = `- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: greeter-ca
  validation_context: { trusted_ca: { inline_string: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" } }
`

// listener is rawGreeter's Listener.
var listener = rawGreeter[strings.Index(rawGreeter, "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener"):strings.Index(rawGreeter, "- \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration")]

const (
	router = `      - name: router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`
	eds      = "  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }\n"
	endpoint = "    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: BACKEND_PORT } } }\n"
	route    = "      route: { cluster: greeter-backends }\n"
)

// refusal is a change to rawGreeter that a group of some client refuses
// under rule (a rule whose name starts so: where clients differ, each has
// its own), and what that client does when it is served anyway: NACK the
// resource of typeURL, or, for the clients in failsRPCs, accept it and
// fail the RPC (or exit), or, for those in crashes, accept it and exit. accepts
// lists the clients that take it.
type refusal struct {
	name, old, new              string
	rule, typeURL               string
	accepts, failsRPCs, crashes []string
}

// ignoredBy are the clients that ACK a case Pylon refuses for them and
// then do not do what it says (a feature test shows what they do
// instead), by the case's name.
var ignoredBy = map[string][]string{
	"pick_first": {"grpc-core"}, // TestClientsPickFirstSendsEveryRPCToTheFirstBackend
	// C-core 1.51.1 balances by lb_policy (ROUND_ROBIN here).
	"weighted round robin": {"grpc-core"},
}

var refusals = []refusal{
	{"as written", "", "", "", xdstype.ClusterURL, []string{"grpc-go", "grpc-core", "grpc-js"}, nil, nil},
	{"no router", router, "      - name: fault\n        typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault }\n", "hcm-router-last", xdstype.ListenerURL, nil, nil, nil},
	{"filter gRPC lacks", router, "      - name: cors\n        typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors }\n" + router, "hcm-filter-unknown", xdstype.ListenerURL, nil, nil, nil},
	{"stateful session", router, "      - name: envoy.filters.http.stateful_session\n        typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession, session_state: { name: envoy.http.stateful_session.cookie, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState, cookie: { name: session, ttl: 60s } } } }\n" + router, "hcm-filter-unknown", xdstype.ListenerURL, nil, nil, nil},
	{"no retries", route, "      route: { cluster: greeter-backends, retry_policy: { retry_on: unavailable, num_retries: 0 } }\n", "route-retry", xdstype.RouteURL, nil, nil, nil},
	{"MAGLEV", eds, eds + "  lb_policy: MAGLEV\n", "cluster-lb-policy", xdstype.ClusterURL, nil, nil, nil},
	{"LEAST_REQUEST", eds, eds + "  lb_policy: LEAST_REQUEST\n", "cluster-lb-policy", xdstype.ClusterURL, []string{"grpc-go"}, nil, nil},
	{"pick_first", eds, eds + "  load_balancing_policy: { policies: [{ typed_extension_config: { name: pick_first, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst } } }] }\n",
		"cluster-lb-config", xdstype.ClusterURL, []string{"grpc-go"}, nil, nil},
	{"weighted round robin", eds, eds + "  load_balancing_policy: { policies: [{ typed_extension_config: { name: wrr, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin } } }] }\n",
		"cluster-lb-config", xdstype.ClusterURL, []string{"grpc-go"}, nil, nil},
	{"ring hash not xxHash", eds, eds + "  lb_policy: RING_HASH\n  ring_hash_lb_config: { hash_function: MURMUR_HASH_2 }\n", "cluster-ring-hash", xdstype.ClusterURL, nil, nil, nil},
	{"STATIC", "  type: EDS\n" + eds, "  type: STATIC\n  load_assignment: { cluster_name: greeter-backends, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 1 } } } }] }] }\n", "cluster-type", xdstype.ClusterURL, nil, nil, nil},
	{"neither client nor server", listener, "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: greeter\n  stat_prefix: greeter\n", "listener-kind", xdstype.ListenerURL, nil, nil, nil},
	{"api_listener not an HttpConnectionManager", listener, "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: greeter\n  api_listener: { api_listener: { \"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: greeter, cluster: greeter-backends } }\n",
		"listener-hcm", xdstype.ListenerURL, nil, nil, nil},
	{"routes not over ADS", "config_source: { ads: {}, resource_api_version: V3 } }\n      http_filters",
		"config_source: { resource_api_version: V3, api_config_source: { api_type: GRPC, transport_api_version: V3, grpc_services: [{ envoy_grpc: { cluster_name: greeter-backends } }] } } }\n      http_filters",
		"hcm-routes", xdstype.ListenerURL, nil, nil, nil},
	{"CONNECT matcher", `    - match: { prefix: "" }`, `    - match: { connect_matcher: {} }`, "route-path", xdstype.RouteURL, nil, nil, nil},
	{"weights sum to zero", route, "      route: { weighted_clusters: { clusters: [{ name: greeter-backends, weight: 0 }] } }\n", "route-weights", xdstype.RouteURL, nil, nil, nil},
	{"plugin not in the routes", route, "      route: { cluster_specifier_plugin: rls }\n", "route-plugin", xdstype.RouteURL, nil, nil, nil},
	{"LOGICAL_DNS of two endpoints", "  type: EDS\n" + eds,
		"  type: LOGICAL_DNS\n  load_assignment: { cluster_name: greeter-backends, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: a.example, port_value: 1 } } } }, { endpoint: { address: { socket_address: { address: b.example, port_value: 1 } } } }] }] }\n",
		"cluster-logical-dns", xdstype.ClusterURL, nil, nil, nil},
	{"load reports elsewhere", eds, eds + "  lrs_server: { ads: {} }\n", "cluster-lrs", xdstype.ClusterURL, nil, nil, nil},
	{"transport socket matches", eds, eds + "  transport_socket_matches: [{ name: raw, match: {}, transport_socket: { name: raw, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer } } }]\n",
		"cluster-socket-matches", xdstype.ClusterURL, []string{"grpc-core", "grpc-js"}, nil, nil},
	{"certificates over SDS", eds, eds + "  transport_socket: { name: envoy.transport_sockets.tls, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, common_tls_context: { validation_context_sds_secret_config: { name: greeter-ca, sds_config: { ads: {}, resource_api_version: V3 } } } } }\n" + caSecret,
		"cluster-tls", xdstype.ClusterURL, nil, nil, nil},
	{"locality missing", "  - locality: { region: interop }\n    load_balancing_weight: 1\n", "  - load_balancing_weight: 1\n", "endpoints-locality", xdstype.EndpointURL, nil, nil, nil},
	{"locality without a weight", "    load_balancing_weight: 1\n    lb_endpoints:", "    lb_endpoints:", "endpoints-locality-weight", xdstype.EndpointURL, nil, []string{"grpc-go", "grpc-core", "grpc-js"}, nil},
	{"priority gap", "    load_balancing_weight: 1\n    lb_endpoints:", "    load_balancing_weight: 1\n    priority: 1\n    lb_endpoints:", "endpoints-priorities", xdstype.EndpointURL, nil, nil, nil},
	{"address twice", endpoint, endpoint + endpoint, "endpoints-duplicate", xdstype.EndpointURL, nil, nil, nil},
	{"RING_HASH", eds, eds + "  lb_policy: RING_HASH\n", "cluster-ring-hash-core", xdstype.ClusterURL, []string{"grpc-go", "grpc-js"}, []string{"grpc-core"}, nil},
	{"outlier detection thresholds unset", eds, eds + "  outlier_detection: { interval: 0.1s }\n", "cluster-outlier-defaults", xdstype.ClusterURL, []string{"grpc-go", "grpc-core"}, nil, []string{"grpc-js"}},
	{"redirect", route, "      redirect: { host_redirect: example.com }\n", "route-action", xdstype.RouteURL, nil, []string{"grpc-go", "grpc-core"}, nil},
}

// TestClientsRejectWhatTheirGroupRefuses: for each client, what Pylon
// refuses for a group of that client (naming the rule) is served anyway
// from a snapshot built without the group checks, and the client NACKs it
// (or fails the RPC it cannot route); what Pylon accepts for a group of
// that client (least_request, for grpc-go), the client ACKs.
func TestClientsRejectWhatTheirGroupRefuses(t *testing.T) {
	for _, rule := range grpcrules.Rules {
		if !slices.ContainsFunc(rule.Clients, func(c grpcrules.Client) bool { return c != grpcrules.Go }) {
			continue // test/integration proves grpc-go's
		}
		if !slices.ContainsFunc(refusals, func(r refusal) bool { return r.rule != "" && strings.HasPrefix(rule.ID, r.rule) }) {
			t.Errorf("rule %s holds for %v and no case here shows a client refusing it", rule.ID, rule.Clients)
		}
	}
	for _, c := range []struct {
		name  string
		start func(t *testing.T, bootstrapPath string, bootstrapJSON []byte) trigger
	}{
		{"grpc-go", func(t *testing.T, _ string, js []byte) trigger { return goTrigger{startGoClient(t, js)} }},
		{"grpc-core", func(t *testing.T, path string, _ []byte) trigger {
			return startSubprocess(t, path, python(t), "client.py", "xds:///greeter")
		}},
		{"grpc-js", func(t *testing.T, path string, _ []byte) trigger {
			return startSubprocess(t, path, nodeJS(t), "client.js", "xds:///greeter")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, r := range refusals {
				t.Run(r.name, func(t *testing.T) { checkRefusal(t, c.name, r, c.start) })
			}
		})
	}
}

// trigger starts a client's xDS subscriptions; an RPC fails with what
// the client says.
type trigger interface {
	client
	subscribe()
}

type goTrigger struct{ *goClient }

func (g goTrigger) subscribe() { g.conn.Connect() }

// subscribe sends an RPC and does not wait for its answer: the channel
// subscribes on its first RPC; the answer (a deadline) is drained at the
// end of the test.
func (p *subprocess) subscribe() {
	line, _ := json.Marshal(request{Method: method, Timeout: 2})
	_, _ = p.stdin.Write(append(line, '\n'))
}

func checkRefusal(t *testing.T, client string, r refusal, start func(*testing.T, string, []byte) trigger) {
	if !strings.Contains(rawGreeter, r.old) {
		t.Fatalf("rawGreeter has no %q", r.old)
	}
	doc := strings.Replace(rawGreeter, r.old, r.new, 1)
	// A live backend: some clients fail only once they connect.
	doc = strings.ReplaceAll(doc, "BACKEND_PORT", strconv.Itoa(startBackends(t, 1)[0]))
	reg := xdstype.New()
	grouped := fmt.Sprintf("groups:\n- name: apps\n  default: true\n  clients: [%s]\n", client) + doc
	_, err := compile.Compile(reg, []config.File{{Path: "greeter.yaml", Data: []byte(grouped)}}, nil)
	accepts := slices.Contains(r.accepts, client)
	switch {
	case accepts && err != nil:
		t.Fatalf("Pylon refused what %s accepts: %v", client, err)
	case !accepts && (err == nil || !strings.Contains(err.Error(), "(rule "+r.rule)):
		t.Fatalf("Pylon did not refuse it for %s under rule %s: %v", client, r.rule, err)
	}
	loaded, err := config.Load(reg, []config.File{{Path: "greeter.yaml", Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Build(reg, loaded.Resources)
	if err != nil {
		t.Fatalf("the snapshot refused it (Envoy's own validation): %v", err)
	}
	watch := &xdsWatch{}
	srv := xdstest.Start(t, xds.Options{Registry: reg, Observer: watch})
	srv.Publisher.Publish(fleet.NewFleet(snap, time.Now()))
	path, js := writeBootstrap(t, client, srv.Addr)
	cl := start(t, path, js)
	if slices.Contains(r.crashes, client) {
		cl.(*subprocess).crashes.Store(true)
		// RPCs start the channel; the client dies on its configuration
		// (at once, or when a timer reads it), within bound.
		if !within(func() bool {
			_, err := cl.call(method, nil)
			return err != nil && strings.Contains(err.Error(), "the client exited")
		}) {
			t.Fatalf("%s did not exit", client)
		}
		t.Logf("%s: exited", client)
		return
	}
	if slices.Contains(r.failsRPCs, client) {
		if p, ok := cl.(*subprocess); ok {
			p.crashes.Store(true)
		}
		if _, err := cl.call(method, nil); err == nil {
			t.Fatalf("%s: the RPC succeeded", client)
		} else {
			t.Logf("%s: %v", client, err)
		}
		return
	}
	cl.subscribe()
	kind, detail, ok := watch.wait(r.typeURL, bound)
	switch {
	case !ok:
		t.Fatalf("%s neither ACKed nor NACKed the %s", client, r.typeURL)
	case accepts && kind != status.RequestACK:
		t.Fatalf("%s NACKed what Pylon accepts for it: %s", client, detail)
	case !accepts && slices.Contains(ignoredBy[r.name], client) && kind != status.RequestACK:
		t.Fatalf("%s NACKed what it was shown to ignore: %s", client, detail)
	case !accepts && !slices.Contains(ignoredBy[r.name], client) && kind != status.RequestNACK:
		t.Fatalf("%s ACKed what Pylon refuses for it", client)
	}
	t.Logf("%s %s: %.300s", client, map[status.EventKind]string{status.RequestACK: "ACK", status.RequestNACK: "NACK"}[kind], detail)
}

// xdsWatch records the first answer (ACK or NACK) of each type after the
// server sent it.
type xdsWatch struct {
	mu      sync.Mutex
	answers map[string]status.Event
}

func (w *xdsWatch) Observe(e *status.Event) {
	if e.Kind != status.RequestNACK && e.Kind != status.RequestACK {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.answers == nil {
		w.answers = map[string]status.Event{}
	}
	if _, seen := w.answers[e.TypeURL]; !seen {
		w.answers[e.TypeURL] = status.Event{Kind: e.Kind, Detail: e.Detail}
	}
}

func (w *xdsWatch) wait(typeURL string, d time.Duration) (status.EventKind, string, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		e, ok := w.answers[typeURL]
		w.mu.Unlock()
		if ok {
			return e.Kind, e.Detail, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, "", false
}
