package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/grpcrules"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	pxds "github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// nackCase is a change to the greeter config that a group of grpc-go
// clients refuses: the rule Pylon names, and what grpc-go says when it is
// served anyway (its NACK's error_detail, or, for a rule whose effect is a
// failing RPC, "": the RPC fails).
type nackCase struct {
	name, old, new string
	rule           string
	typeURL        string
	nack           string
}

const (
	routerFilter = `      - name: router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`
	faultFilter = `      - name: fault
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault }
`
	corsFilter = `      - name: cors
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors }
`
	edsLine      = "  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }\n"
	endpointLine = "    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 1 } } }\n"
	routeLine    = "      route: { cluster: greeter-backends }\n"
)

// provenElsewhere are the rules for grpc-go that another test shows
// grpc-go refusing.
var provenElsewhere = []string{
	"server-listener", // TestGRPCGoServerRejectsWhatItsGroupRefuses
	// TestGRPCGoServerRejectsWhatItsGroupRefusesByRule:
	"server-filter-chains", "server-network-filters", "server-tls", "server-rbac", "server-route-action",
}

// caSecret is a CA for a cluster's TLS over SDS.
const caSecret = `- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: greeter-ca
  validation_context: { trusted_ca: { inline_string: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" } }
`

// greeterListener is grpcConfig's Listener.
var greeterListener = func() string {
	b := grpcConfig("greeter-backends", "greeter-backends", []int{1})
	from := strings.Index(b, "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener")
	return b[from:strings.Index(b, "- \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration")]
}()

var nackCases = []nackCase{
	{"no router", routerFilter, faultFilter, "hcm-router-last", xdstype.ListenerURL, `http filter "fault" is not a terminal filter`},
	{"router not last", routerFilter, routerFilter + faultFilter, "hcm-router-last", xdstype.ListenerURL, `http filter "router" is a terminal filter but it is not last`},
	{"filter gRPC lacks", routerFilter, corsFilter + routerFilter, "hcm-filter-unknown", xdstype.ListenerURL, `no filter implementation found for "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"`},
	{"routes not over ADS", "rds: { route_config_name: greeter, config_source: { ads: {}, resource_api_version: V3 } }",
		"rds: { route_config_name: greeter, config_source: { resource_api_version: V3, api_config_source: { api_type: GRPC, transport_api_version: V3, grpc_services: [{ envoy_grpc: { cluster_name: greeter-backends } }] } } }",
		"hcm-routes", xdstype.ListenerURL, "LDS's RDS configSource is not ADS or Self"},
	{"no retries", routeLine, "      route: { cluster: greeter-backends, retry_policy: { retry_on: unavailable, num_retries: 0 } }\n", "route-retry", xdstype.RouteURL, "retry_policy.num_retries = 0; must be >= 1"},
	{"weights sum to zero", routeLine, "      route: { weighted_clusters: { clusters: [{ name: greeter-backends, weight: 0 }] } }\n", "route-weights", xdstype.RouteURL, "has no valid cluster in WeightedCluster action"},
	{"MAGLEV", edsLine, edsLine + "  lb_policy: MAGLEV\n", "cluster-lb-policy", xdstype.ClusterURL, "unexpected lbPolicy MAGLEV"},
	{"wrr_locality without a child policy", edsLine, edsLine + "  load_balancing_policy: { policies: [{ typed_extension_config: { name: wrr, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality, endpoint_picking_policy: { policies: [] } } } }] }\n",
		"cluster-lb-config", xdstype.ClusterURL, "error converting LoadBalancingPolicy"},
	{"ring hash not xxHash", edsLine, edsLine + "  lb_policy: RING_HASH\n  ring_hash_lb_config: { hash_function: MURMUR_HASH_2 }\n", "cluster-ring-hash", xdstype.ClusterURL, "unsupported ring_hash hash function MURMUR_HASH_2"},
	{"STATIC", "  type: EDS\n  connect_timeout: 1s\n" + edsLine, "  type: STATIC\n  connect_timeout: 1s\n  load_assignment: { cluster_name: greeter-backends, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 1 } } } }] }] }\n",
		"cluster-type", xdstype.ClusterURL, "unsupported cluster type (STATIC"},
	{"neither client nor server", greeterListener, "- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  name: greeter\n  stat_prefix: greeter\n",
		"listener-kind", xdstype.ListenerURL, "no address field in LDS response"},
	{"api_listener not an HttpConnectionManager", greeterListener, `- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: greeter
  api_listener:
    api_listener: { "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: greeter, cluster: greeter-backends }
`, "listener-hcm", xdstype.ListenerURL, "unexpected http connection manager resource type"},
	{"trusted hops", "      stat_prefix: greeter\n", "      stat_prefix: greeter\n      xff_num_trusted_hops: 1\n", "hcm-unsupported-value", xdstype.ListenerURL, "xff_num_trusted_hops must be unset or zero"},
	{"CONNECT matcher", `    - match: { prefix: "" }`, `    - match: { connect_matcher: {} }`, "route-path", xdstype.RouteURL, "has an unrecognized path specifier"},
	{"plugin not in the routes", routeLine, "      route: { cluster_specifier_plugin: rls }\n", "route-plugin", xdstype.RouteURL, "that is not in Route Configuration"},
	{"LOGICAL_DNS of two endpoints", "  type: EDS\n  connect_timeout: 1s\n" + edsLine,
		"  type: LOGICAL_DNS\n  connect_timeout: 1s\n  load_assignment: { cluster_name: greeter-backends, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: a.example, port_value: 1 } } } }, { endpoint: { address: { socket_address: { address: b.example, port_value: 1 } } } }] }] }\n",
		"cluster-logical-dns", xdstype.ClusterURL, "must have exactly one endpoint"},
	{"load reports elsewhere", edsLine, edsLine + "  lrs_server: { ads: {} }\n", "cluster-lrs", xdstype.ClusterURL, "unsupported config_source_specifier"},
	{"transport socket matches", edsLine, edsLine + "  transport_socket_matches: [{ name: raw, match: {}, transport_socket: { name: raw, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer } } }]\n",
		"cluster-socket-matches", xdstype.ClusterURL, "unsupported transport_socket_matches field is non-empty"},
	{"certificates over SDS", edsLine, edsLine + "  transport_socket: { name: envoy.transport_sockets.tls, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, common_tls_context: { validation_context_sds_secret_config: { name: greeter-ca, sds_config: { ads: {}, resource_api_version: V3 } } } } }\n" + caSecret,
		"cluster-tls", xdstype.ClusterURL, "validation context contains unexpected type"},
	{"locality missing", "  - locality: { region: test }\n    load_balancing_weight: 1\n", "  - load_balancing_weight: 1\n", "endpoints-locality", xdstype.EndpointURL, "EDS response contains a locality without ID"},
	{"locality without a weight", "    load_balancing_weight: 1\n    lb_endpoints:", "    lb_endpoints:", "endpoints-locality-weight", "", ""},
	{"priority gap", "    load_balancing_weight: 1\n    lb_endpoints:", "    load_balancing_weight: 1\n    priority: 1\n    lb_endpoints:", "endpoints-priorities", xdstype.EndpointURL, "priority 0 missing"},
	{"address twice", endpointLine, endpointLine + endpointLine, "endpoints-duplicate", xdstype.EndpointURL, "duplicate endpoint with the same address 127.0.0.1:1"},
	{"redirect", routeLine, "      redirect: { host_redirect: example.com }\n", "route-action", "", ""},
}

// TestGRPCGoRejectsWhatItsGroupRefuses proves each refusal of a group of
// grpc-go clients with grpc-go itself: the config Pylon refuses, naming the
// rule, is served anyway by an xDS server fed a snapshot built without the
// group checks, and grpc-go's own xDS client NACKs it (or, for a route it
// cannot use, fails the RPC with UNAVAILABLE).
func TestGRPCGoRejectsWhatItsGroupRefuses(t *testing.T) {
	proven := map[string]bool{}
	for _, tc := range nackCases {
		proven[tc.rule] = true
	}
	for _, r := range grpcrules.Rules {
		if slices.Contains(r.Clients, grpcrules.Go) && !proven[r.ID] && !slices.Contains(provenElsewhere, r.ID) {
			t.Errorf("rule %s holds for grpc-go and no case here shows grpc-go refusing it", r.ID)
		}
	}
	base := grpcConfig("greeter-backends", "greeter-backends", []int{1})
	for _, tc := range nackCases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("the greeter config has no %q", tc.old)
			}
			doc := strings.Replace(base, tc.old, tc.new, 1)
			grouped := "groups:\n- name: apps\n  default: true\n  clients: [grpc-go]\n" + doc
			reg := xdstype.New()
			_, err := compile.Compile(reg, []config.File{{Path: "greeter.yaml", Data: []byte(grouped)}}, nil)
			if err == nil || !strings.Contains(err.Error(), "grpc-go of group \"apps\"") || !strings.Contains(err.Error(), "(rule "+tc.rule+")") {
				t.Fatalf("Pylon did not refuse it under rule %s: %v", tc.rule, err)
			}
			// Served anyway: the same resources, without the group checks.
			loaded, err := config.Load(reg, []config.File{{Path: "greeter.yaml", Data: []byte(doc)}})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := snapshot.Build(reg, loaded.Resources)
			if err != nil {
				t.Fatalf("the snapshot refused it (Envoy's own validation): %v", err)
			}
			nacks := &nackWatch{}
			srv := xdstest.Start(t, pxds.Options{Registry: reg, Observer: nacks})
			srv.Publisher.Publish(fleet.NewFleet(snap, time.Now()))
			conn := dialGreeter(t, srv.Addr)
			client := testgrpc.NewTestServiceClient(conn)
			if tc.nack == "" {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err == nil {
					t.Fatal("the RPC succeeded")
				} else {
					t.Logf("grpc-go: %v", err)
				}
				return
			}
			conn.Connect() // the resolver subscribes; no RPC is needed
			detail, ok := nacks.wait(tc.typeURL, 10*time.Second)
			if !ok {
				t.Fatalf("grpc-go did not NACK the %s", tc.typeURL)
			}
			if !strings.Contains(detail, tc.nack) {
				t.Fatalf("grpc-go NACKed with %q, want it to say %q", detail, tc.nack)
			}
			t.Logf("grpc-go NACK: %.200s", detail)
		})
	}
}

// dialGreeter is a grpc-go client of xds:///greeter bootstrapped by
// `pylon bootstrap --grpc` against the xDS server at addr.
func dialGreeter(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"bootstrap", "--grpc", "--node-id", "nack-client", "--node-cluster", "apps", "--xds-address", addr}, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc: exit %d: %s", code, stderr.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// nackWatch records the NACKs the xDS server sees.
type nackWatch struct {
	mu    sync.Mutex
	nacks map[string]string // type URL: the first NACK's detail
}

func (w *nackWatch) Observe(e *status.Event) {
	if e.Kind != status.RequestNACK {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nacks == nil {
		w.nacks = map[string]string{}
	}
	if _, seen := w.nacks[e.TypeURL]; !seen {
		w.nacks[e.TypeURL] = e.Detail
	}
}

// wait polls for a NACK of typeURL within d.
func (w *nackWatch) wait(typeURL string, d time.Duration) (string, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		detail, ok := w.nacks[typeURL]
		w.mu.Unlock()
		if ok {
			return detail, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", false
}

// TestGRPCGoServerRejectsWhatItsGroupRefuses proves the server-listener
// rule with an xDS-enabled grpc-go server (gRFC A36): Pylon refuses its
// Listener with listener_filters for a group of grpc-go, and the server
// NACKs it when it is served anyway.
func TestGRPCGoServerRejectsWhatItsGroupRefuses(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	doc := fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: "grpc/server?xds.resource.listening_address=127.0.0.1:%[1]d"
  address: { socket_address: { address: 127.0.0.1, port_value: %[1]d } }
  listener_filters: [{ name: tls, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector } }]
  filter_chains:
  - filters:
    - name: hcm
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: server
        route_config: { name: server, virtual_hosts: [{ name: server, domains: ["*"], routes: [{ match: { prefix: "" }, non_forwarding_action: {} }] }] }
        http_filters: [{ name: router, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router } }]
`, port)
	reg := xdstype.New()
	grouped := "groups:\n- name: servers\n  default: true\n  clients: [grpc-go]\n" + doc
	_, err = compile.Compile(reg, []config.File{{Path: "server.yaml", Data: []byte(grouped)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "listener_filters: grpc-go of group \"servers\"") || !strings.Contains(err.Error(), "(rule server-listener)") {
		t.Fatalf("Pylon did not refuse it under rule server-listener: %v", err)
	}
	loaded, err := config.Load(reg, []config.File{{Path: "server.yaml", Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Build(reg, loaded.Resources)
	if err != nil {
		t.Fatalf("the snapshot refused it (Envoy's own validation): %v", err)
	}
	nacks := &nackWatch{}
	srv := xdstest.Start(t, pxds.Options{Registry: reg, Observer: nacks})
	srv.Publisher.Publish(fleet.NewFleet(snap, time.Now()))

	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"bootstrap", "--grpc", "--node-id", "nack-server", "--xds-address", srv.Addr}, &bs, &stderr); code != 0 {
		t.Fatalf("pylon bootstrap --grpc: exit %d: %s", code, stderr.String())
	}
	var boot map[string]any
	if err := json.Unmarshal(bs.Bytes(), &boot); err != nil {
		t.Fatal(err)
	}
	boot["server_listener_resource_name_template"] = "grpc/server?xds.resource.listening_address=%s"
	raw, err := json.Marshal(boot)
	if err != nil {
		t.Fatal(err)
	}
	server, err := xds.NewGRPCServer(grpc.Creds(insecure.NewCredentials()), xds.BootstrapContentsForTesting(raw))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = server.Serve(lis) }()
	t.Cleanup(func() { server.Stop(); <-done })

	detail, ok := nacks.wait(xdstype.ListenerURL, 10*time.Second)
	if !ok {
		t.Fatal("the grpc-go server did not NACK its Listener")
	}
	if want := "unsupported field 'listener_filters'"; !strings.Contains(detail, want) {
		t.Fatalf("the grpc-go server NACKed with %q, want it to say %q", detail, want)
	}
	t.Logf("grpc-go server NACK: %.200s", detail)
}
