package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
)

type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id string
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.id}, nil
}

// startBackends starts n gRPC test servers on loopback and returns their
// ports.
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

// grpcClient is grpc-go's own xDS client, bootstrapped by `pylon bootstrap
// --grpc` against xdsAddr, dialing xds:///greeter.
func grpcClient(t *testing.T, xdsAddr, nodeID, cluster string) testgrpc.TestServiceClient {
	t.Helper()
	var bs, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"bootstrap", "--grpc", "--node-id", nodeID, "--node-cluster", cluster, "--xds-address", xdsAddr}, &bs, &stderr); code != 0 {
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
	return testgrpc.NewTestServiceClient(conn)
}

// call makes a wait-for-ready RPC and returns the backend that served it.
func call(t *testing.T, c testgrpc.TestServiceClient) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("RPC failed: %v", err)
	}
	return resp.GetServerId()
}

// TestGRPCClientGetsConfigThroughRelay: grpc-go's xDS client bootstrapped
// against the relay routes RPCs as the upstream Pylon's config says, and
// follows a change of it.
func TestGRPCClientGetsConfigThroughRelay(t *testing.T) {
	ports := startBackends(t, 2)
	up := startUpstream(t, "", greeter(ports...))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	client := grpcClient(t, rd.xds, "grpc-1", "e2e")

	seen := map[string]bool{}
	for i := 0; i < 200 && len(seen) < 2; i++ {
		seen[call(t, client)] = true
	}
	if len(seen) != 2 {
		t.Fatalf("RPCs through the relay reached %v, want both backends", seen)
	}
	// pylon status reads the relay as it reads serve: its proxy, in the
	// key's group.
	var out, stderr bytes.Buffer
	if code := cli.Execute(context.Background(), []string{"status", "--admin-addr", rd.admin, "--data-dir", rd.dataDir}, &out, &stderr); code != 0 {
		t.Fatalf("pylon status against the relay: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "grpc-1") || !strings.Contains(out.String(), "e2e") {
		t.Errorf("pylon status against the relay does not show proxy grpc-1 in group e2e:\n%s", out.String())
	}

	writeAtomically(t, up.cfg, greeter(ports[1]))
	if !eventually(func() bool {
		for range 10 {
			if call(t, client) != "backend-1" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the client did not follow the upstream's change through the relay")
	}
}

// TestGRPCClientFallsBackToTheRelay: a bootstrap naming Pylon first and
// the relay second (gRFC A71): with Pylon away, a new grpc-go client gets
// its config from the relay, which serves what it kept.
func TestGRPCClientFallsBackToTheRelay(t *testing.T) {
	ports := startBackends(t, 1)
	up := startUpstream(t, "", greeter(ports...))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	// The relay holds key e2e's config before Pylon goes.
	subscribeEndpoints(t, rd.xds, "warm-up")
	up.d.Stop(t)

	bootstrap := fmt.Sprintf(`{
  "xds_servers": [
    {"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]},
    {"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}
  ],
  "node": {"id": "grpc-fallback", "cluster": "e2e"}
}`, up.d.XDS, rd.xds)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("an RPC with Pylon away and the relay as fallback: %v", err)
	}
	if resp.GetServerId() != "backend-0" {
		t.Fatalf("served by %q, want backend-0", resp.GetServerId())
	}
}
