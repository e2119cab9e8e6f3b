package replicas_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"
)

// backend is a gRPC test server on loopback that names itself in replies.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id   string
	port int
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

// startBackend serves a backend named id on 127.0.0.1:0 until the test
// ends.
func startBackend(t *testing.T, id string) *backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{id: id, port: lis.Addr().(*net.TCPAddr).Port}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, b)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return b
}

// greeterDoc routes xds:///greeter (the quickstart's gRPC listener, route
// and cluster) to b: it replaces the quickstart's greeter assignment.
func greeterDoc(b *backend) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: greeter
  endpoints:
  - locality: { region: local }
    load_balancing_weight: 1
    lb_endpoints:
    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %d } } }
`, b.port)
}

// greeter is grpc-go's own xDS client as a data plane: a channel to
// xds:///greeter whose xDS server is xdsAddr.
type greeter struct {
	t    *testing.T
	node string
	testgrpc.TestServiceClient
}

// newGreeter bootstraps grpc-go with `pylon bootstrap --grpc` for node
// against xdsAddr (a replica, or the forwarder in front of them), with a
// resolver of its own: grpc-go reads its process-wide bootstrap once.
func newGreeter(t *testing.T, xdsAddr, node string) greeter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var bs, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, pylonBin, "bootstrap", "--grpc", "--node-id", node, "--node-cluster", "replicas-test", "--xds-address", xdsAddr)
	cmd.Stdout, cmd.Stderr = &bs, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pylon bootstrap --grpc: %v: %s", err, stderr.String())
	}
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bs.Bytes())
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v\n%s", err, bs.String())
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return greeter{t: t, node: node, TestServiceClient: testgrpc.NewTestServiceClient(conn)}
}

// call makes one wait-for-ready RPC and returns the backend that served
// it, or the error.
func (g greeter) call() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := g.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	return resp.GetServerId(), nil
}

// reaches waits until an RPC is served by backend id, within bound; an RPC
// that fails fails the test (the data plane must keep working whatever the
// control plane goes through).
func (g greeter) reaches(id string) {
	g.t.Helper()
	waitUntil(g.t, "an RPC served by "+id, func() bool {
		got, err := g.call()
		if err != nil {
			g.t.Fatalf("RPC failed: %v", err)
		}
		return got == id
	})
}

// callsDuring makes an RPC every 20ms (at most 5,000) until the returned
// stop is called, which reports how many succeeded and the errors of those
// that failed: the data plane must not notice what its control plane goes
// through.
func (g greeter) callsDuring() (stop func() (ok int, failed []error)) {
	done, quit := make(chan struct{}), make(chan struct{})
	var ok int
	var failed []error
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range 5000 {
			if _, err := g.call(); err != nil {
				failed = append(failed, err)
			} else {
				ok++
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() (int, []error) {
		once.Do(func() { close(quit); <-done })
		return ok, failed
	}
	g.t.Cleanup(func() { stop() })
	return stop
}
