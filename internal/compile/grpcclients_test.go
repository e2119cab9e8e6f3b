package compile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestGroupClientsRefuseWhatTheyWouldNACK compiles a group of gRPC clients
// receiving resources they would NACK: each is refused naming the clients,
// the resource and the field, and a group without clients gets the same
// kind of resource unchecked.
func TestGroupClientsRefuseWhatTheyWouldNACK(t *testing.T) {
	err := compileTestdata(t, "grpc_clients_refused.yaml")
	if err == nil {
		t.Fatal("compiled; want a refusal")
	}
	got := err.Error()
	for _, want := range []string{
		`Listener "no-router": api_listener.api_listener.http_filters: grpc-go, grpc-core and grpc-js of group "apps" would NACK it`,
		`Listener "router-first": api_listener.api_listener.http_filters[0]`,
		`Listener "ext-filter": api_listener.api_listener.http_filters[0].typed_config`,
		`Listener "scoped": api_listener.api_listener.rds.config_source`,
		`Listener "inline": api_listener.api_listener.route_config.virtual_hosts[0].routes[0].redirect`,
		`Listener "inline": api_listener.api_listener.route_config.virtual_hosts[0].routes[1].route.weighted_clusters`,
		`RouteConfiguration "greeter": virtual_hosts[0].routes[0].route.retry_policy.num_retries`,
		`Cluster "maglev": lb_policy: grpc-go, grpc-core and grpc-js of group "apps" would NACK it`,
		`Cluster "least-request": lb_policy: grpc-core and grpc-js of group "apps" would NACK it`,
		`Cluster "ring-md5": ring_hash_lb_config.hash_function`,
		`Cluster "static": type: grpc-go, grpc-core and grpc-js of group "apps" would NACK it`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, got)
		}
	}
	for _, never := range []string{`Cluster "envoy-maglev"`, `Listener "greeter":`, `Cluster "greeter-backends"`} {
		if strings.Contains(got, never) {
			t.Errorf("the refusal names %s, which no gRPC client of a group refuses:\n%s", never, got)
		}
	}
}

// TestGroupClientsAcceptWhatTheyImplement compiles what grpc-go accepts and
// C-core or grpc-js would not (least_request), for a group of grpc-go only.
func TestGroupClientsAcceptWhatTheyImplement(t *testing.T) {
	if err := compileTestdata(t, "grpc_clients_accepted.yaml"); err != nil {
		t.Fatalf("refused: %v", err)
	}
}

func compileTestdata(t *testing.T, name string) error {
	t.Helper()
	dir := filepath.Join("testdata", "compile")
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(xdstype.New(), []config.File{{Path: path, Data: data, Dir: dir}}, nil)
	return err
}

// TestGRPCServiceOutlierDetectionIsWhatGRPCReads: a service of a gRPC
// target that asks only for consecutive_5xx, which gRPC clients ignore
// (gRFC A50), is refused, as is a failure percentage over 100.
func TestGRPCServiceOutlierDetectionIsWhatGRPCReads(t *testing.T) {
	const doc = `services:
- name: greeter
  protocol: grpc
  outlier_detection: { consecutive_5xx: 5 }
  endpoints: [{ address: 127.0.0.1, port: 8080 }]
- name: other
  protocol: grpc
  outlier_detection: { failure_percentage: { threshold: 101 } }
  endpoints: [{ address: 127.0.0.1, port: 8081 }]
grpc:
- target: greeter
  to: [{ service: greeter }, { service: other }]
`
	_, err := Compile(xdstype.New(), []config.File{{Path: "g.yaml", Data: []byte(doc)}}, nil)
	if err == nil {
		t.Fatal("compiled; want a refusal")
	}
	for _, want := range []string{
		`g.yaml:4: service "greeter": outlier_detection.consecutive_5xx: proxyless gRPC clients ignore it; say failure_percentage`,
		`g.yaml:8: service "other": outlier_detection.failure_percentage.threshold: 101: a percentage, at most 100`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}
