// Package integration runs the whole Pylon daemon in process and drives it
// with real data planes over loopback.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/pipeline"
)

// bound caps every polling loop in this file.
const bound = 20 * time.Second

type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id string
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

// startBackends starts n gRPC test servers on loopback and returns their ports.
func startBackends(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, &backend{id: fmt.Sprintf("backend-%d", i)})
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// grpcConfig is what a gRPC client dialling xds:///greeter needs: an API
// listener, its routes sending everything to routeTo, and an EDS cluster
// named cluster with the backends' assignment.
func grpcConfig(routeTo, cluster string, ports []int) string {
	var eps strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&eps, "    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %d } } }\n", p)
	}
	return fmt.Sprintf(`resources:
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
      route: { cluster: %[1]s }
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %[2]s
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %[2]s
  endpoints:
  - locality: { region: test }
    load_balancing_weight: 1
    lb_endpoints:
%[3]s`, routeTo, cluster, eps.String())
}

// greeterConfig routes to cluster (which must be greeter-backends to be
// valid) over the given backends.
func greeterConfig(cluster string, ports []int) string {
	return grpcConfig(cluster, "greeter-backends", ports)
}

// writeAtomically replaces path the way editors and deploy tools do: write a
// temporary file, then rename it over the old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

type pylon struct {
	xdsAddr, adminAddr string
	token              string // the admin API's write token (store mode)
	dataDir            string
	readToken          string // the admin API's read token
}

// startPylon runs the daemon in file mode on loopback ports until the test
// ends.
func startPylon(t *testing.T, configPath string) *pylon {
	t.Helper()
	p, _ := runPylon(t, daemon.Options{ConfigPath: configPath})
	return p
}

// runPylon runs the daemon with o on loopback ports until stop is called or
// the test ends.
func runPylon(t testing.TB, o daemon.Options) (p *pylon, stop func()) {
	t.Helper()
	o.XDSAddr, o.AdminAddr = "", "" // loopback ports, daemontest's
	if o.DebounceQuiet == 0 {
		// Short, for the tests' sake; a benchmark may ask for the
		// daemon's own.
		o.DebounceQuiet, o.DebounceMax = daemontest.Quiet, daemontest.MaxWait
	}
	o.Identifier = "pylon-e2e"
	// The read token is generated in the data folder, in file mode too.
	d := daemontest.Start(t, o)
	p = &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, dataDir: d.DataDir, readToken: d.Token(t, "read-token")}
	return p, func() { d.Stop(t) }
}

func (p *pylon) status(t *testing.T) pipeline.Status {
	t.Helper()
	var body struct {
		Config pipeline.Status `json:"config"`
	}
	if err := json.Unmarshal([]byte(p.get(t, "/status")), &body); err != nil {
		t.Fatal(err)
	}
	return body.Config
}

// get reads an admin API path with the read token and returns the body;
// anything but 200 fails the test.
func (p *pylon) get(t testing.TB, path string) string {
	t.Helper()
	code, body := p.tryGet(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", path, code, body)
	}
	return body
}

// tryGet reads an admin API path with the read token.
func (p *pylon) tryGet(t testing.TB, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestGRPCClientFollowsConfig is the end-to-end check of the core: grpc-go's
// own xDS client, bootstrapped by `pylon bootstrap --grpc`, routes RPCs where
// the config file says, follows edits, and survives a bad edit.
func TestGRPCClientFollowsConfig(t *testing.T) {
	ports := startBackends(t, 3)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, greeterConfig("greeter-backends", ports))
	p := startPylon(t, cfg)

	client := p.grpcClient(t, "e2e-client")
	call := func() string { return client.call(t) }

	// 1. RPCs reach every backend (round robin over the EDS assignment).
	seen := map[string]int{}
	for i := 0; i < 300 && len(seen) < 3; i++ {
		seen[call()]++
	}
	if len(seen) != 3 {
		t.Fatalf("RPCs reached %v, want all 3 backends", seen)
	}

	// 2. Rewrite the config: one backend only. The client follows.
	writeAtomically(t, cfg, greeterConfig("greeter-backends", ports[:1]))
	if !eventually(func() bool { return onlyTo(call, "backend-0", 20) }) {
		t.Fatal("client did not follow the config to backend-0 alone")
	}
	good := p.status(t).Version

	// 3. An invalid edit (a route to a cluster that does not exist) is
	// refused with a precise error; the client keeps working on the last
	// good config.
	writeAtomically(t, cfg, greeterConfig("no-such-cluster", ports))
	var st pipeline.Status
	if !eventually(func() bool { st = p.status(t); return st.Refused != nil }) {
		t.Fatal("the invalid config was not refused")
	}
	for _, want := range []string{cfg, `RouteConfiguration "greeter"`, "virtual_hosts[0].routes[0].route.cluster", `Cluster "no-such-cluster"`} {
		if !strings.Contains(st.Refused.Error, want) {
			t.Errorf("refusal %q does not mention %q", st.Refused.Error, want)
		}
	}
	if st.Version != good {
		t.Fatalf("serving version %s after a refused edit, want %s", st.Version, good)
	}
	if !onlyTo(call, "backend-0", 20) {
		t.Fatal("RPCs moved after a refused edit")
	}

	// 4. A truncated write (cut inside a flow mapping) is refused the same way.
	full := greeterConfig("greeter-backends", ports)
	writeAtomically(t, cfg, full[:strings.Index(full, "rds: {")+10])
	if !eventually(func() bool {
		st = p.status(t)
		return st.Refused != nil && strings.Contains(st.Refused.Error, "invalid YAML")
	}) {
		t.Fatalf("truncated config not refused: %+v", st.Refused)
	}
	if !onlyTo(call, "backend-0", 20) {
		t.Fatal("RPCs moved after a truncated write")
	}

	// 5. Fixing the file recovers: all three backends again.
	writeAtomically(t, cfg, greeterConfig("greeter-backends", ports))
	seen = map[string]int{}
	if !eventually(func() bool { seen[call()]++; return len(seen) == 3 }) {
		t.Fatalf("after the fix RPCs reached %v", seen)
	}
	if st = p.status(t); st.Refused != nil {
		t.Fatalf("refusal not cleared: %v", st.Refused.Error)
	}
}

// greeter is a gRPC client of xds:///greeter, bootstrapped by
// `pylon bootstrap --grpc` as an operator would, with its own xDS client.
type greeter struct {
	testgrpc.TestServiceClient
}

func (p *pylon) grpcClient(t *testing.T, nodeID string) greeter {
	t.Helper()
	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"bootstrap", "--grpc", "--node-id", nodeID, "--node-cluster", "e2e", "--xds-address", p.xdsAddr}, &bs, &stderr); code != 0 {
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
	return greeter{testgrpc.NewTestServiceClient(conn)}
}

// call makes a wait-for-ready RPC and returns the backend that served it.
func (g greeter) call(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		resp, err := g.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		// grpc-go's own race when a route moves to a new cluster (see
		// TestGRPCClientFlipsWithoutFailures): not the control plane's,
		// and gone on the next RPC. Anything else fails the test.
		if err != nil && strings.Contains(err.Error(), "unknown cluster selected for RPC") && attempt < 3 {
			continue
		}
		if err != nil {
			t.Fatalf("RPC failed: %v", err)
		}
		return resp.GetServerId()
	}
}

// onlyTo makes n RPCs and reports whether all reached id.
func onlyTo(call func() string, id string, n int) bool {
	for range n {
		if call() != id {
			return false
		}
	}
	return true
}

// eventually polls cond every 10ms until it holds, within bound.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
