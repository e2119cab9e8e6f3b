package integration

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
	pxds "github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// serverListener is a raw Listener a grpc-go server on port accepts.
func serverListener(port int) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: "grpc/server?xds.resource.listening_address=127.0.0.1:%[1]d"
  address: { socket_address: { address: 127.0.0.1, port_value: %[1]d } }
  filter_chains:
  - name: chain
    filters:
    - name: hcm
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: server
        route_config: { name: server, virtual_hosts: [{ name: server, domains: ["*"], routes: [{ match: { prefix: "" }, non_forwarding_action: {} }] }] }
        http_filters:
        - name: router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`, port)
}

// serverNackCases are changes to serverListener that a group of grpc-go
// servers refuses, the rule Pylon names, and what the server says when it
// is served anyway: its NACK's detail, or, for "", the RPC fails.
var serverNackCases = []struct {
	name, old, new, rule, nack string
}{
	{"only a chain for a destination port", "  - name: chain\n", "  - name: chain\n    filter_chain_match: { destination_port: 443 }\n",
		"server-filter-chains", "no supported filter chains and no default filter chain"},
	{"a network filter twice", "    - name: hcm\n", `    - name: hcm
      typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: a, route_config: {}, http_filters: [{ name: router, typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router } }] }
    - name: hcm
`, "server-network-filters", `duplicate filter name "hcm"`},
	{"TLS requiring SNI", "  - name: chain\n", `  - name: chain
    transport_socket: { name: envoy.transport_sockets.tls, typed_config: { "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, require_sni: true, common_tls_context: { tls_certificate_provider_instance: { instance_name: default } } } }
`, "server-tls", "require_sni field set to true"},
	{"RBAC on a grpc- header", "        http_filters:\n", `        http_filters:
        - name: rbac
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC, rules: { policies: { p: { permissions: [{ header: { name: grpc-timeout, present_match: true } }], principals: [{ any: true }] } } } }
`, "server-rbac", `starts with "grpc-"`},
	{"a route that forwards", "non_forwarding_action: {}", "redirect: { host_redirect: example.com }", "server-route-action", ""},
}

// TestGRPCGoServerRejectsWhatItsGroupRefusesByRule proves each server rule
// with an xDS-enabled grpc-go server (gRFC A36): Pylon refuses the Listener
// for a group of grpc-go under the rule, and the server, served it anyway,
// NACKs it (or serves and fails the RPC with UNAVAILABLE).
func TestGRPCGoServerRejectsWhatItsGroupRefusesByRule(t *testing.T) {
	for _, tc := range serverNackCases {
		t.Run(tc.name, func(t *testing.T) {
			lis := listenLoopback(t)
			port := lis.Addr().(*net.TCPAddr).Port
			base := serverListener(port)
			if !strings.Contains(base, tc.old) {
				t.Fatalf("the server Listener has no %q", tc.old)
			}
			doc := strings.Replace(base, tc.old, tc.new, 1)
			reg := xdstype.New()
			grouped := "groups:\n- name: servers\n  default: true\n  clients: [grpc-go]\n" + doc
			_, err := compile.Compile(reg, []config.File{{Path: "server.yaml", Data: []byte(grouped)}}, nil)
			if err == nil || !strings.Contains(err.Error(), `grpc-go of group "servers"`) || !strings.Contains(err.Error(), "(rule "+tc.rule+")") {
				t.Fatalf("Pylon did not refuse it under rule %s: %v", tc.rule, err)
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
			s := startXDSServer(t, lis, srv.Addr, "nack-server")
			if tc.nack == "" {
				s.waitServing(t)
				err := directCall(t, port, insecure.NewCredentials())
				if grpcstatus.Code(err) != codes.Unavailable {
					t.Fatalf("the RPC: %v, want UNAVAILABLE", err)
				}
				t.Logf("grpc-go server: %v", err)
				return
			}
			detail, ok := nacks.wait(xdstype.ListenerURL, 10*time.Second)
			if !ok {
				t.Fatal("the grpc-go server did not NACK its Listener")
			}
			if !strings.Contains(detail, tc.nack) {
				t.Fatalf("the grpc-go server NACKed with %q, want it to say %q", detail, tc.nack)
			}
			t.Logf("grpc-go server NACK: %.300s", detail)
		})
	}
}
