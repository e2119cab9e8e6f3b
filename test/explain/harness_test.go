package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/route"
)

// bound caps every wait in this package.
const bound = 20 * time.Second

// backend is a loopback gRPC server that counts the calls it serves.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	calls atomic.Int64
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	b.calls.Add(1)
	return &testgrpc.SimpleResponse{}, nil
}

func (b *backend) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	b.calls.Add(1)
	return &testgrpc.Empty{}, nil
}

// backends are n counting servers, by port.
type backends struct {
	ports []int
	by    map[int]*backend
}

func startBackends(t *testing.T, n int) *backends {
	t.Helper()
	bs := &backends{by: map[int]*backend{}}
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		b := &backend{}
		testgrpc.RegisterTestServiceServer(s, b)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Serve(lis) }()
		t.Cleanup(func() { s.Stop(); <-done })
		port := lis.Addr().(*net.TCPAddr).Port
		bs.ports = append(bs.ports, port)
		bs.by[port] = b
	}
	return bs
}

// counts reads and resets every backend's count, by port.
func (bs *backends) counts() map[int]int64 {
	out := map[int]int64{}
	for p, b := range bs.by {
		out[p] = b.calls.Swap(0)
	}
	return out
}

// pylon is a running daemon.
type pylon struct{ xdsAddr, adminAddr, dataDir string }

// startPylon runs the daemon on loopback: file mode on configPath, or with
// configPath "" the embedded store in a fresh data folder.
func startPylon(t *testing.T, configPath string) *pylon {
	t.Helper()
	o := daemontest.FileMode(configPath)
	o.Identifier = "pylon-explain"
	d := daemontest.Start(t, o)
	return &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, dataDir: d.DataDir}
}

// pylonCLI runs the command line against p and returns its output.
func (p *pylon) cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, stderr bytes.Buffer
	args = append(args, "--admin-addr", p.adminAddr, "--data-dir", p.dataDir)
	if code := cli.Execute(context.Background(), args, &out, &stderr); code != 0 {
		t.Fatalf("pylon %v: exit %d: %s", args, code, stderr.String())
	}
	return out.String()
}

// client is a gRPC client of xds:///target with its own xDS client,
// bootstrapped by `pylon bootstrap --grpc` as an operator would.
func (p *pylon) client(t *testing.T, nodeID, target string) testgrpc.TestServiceClient {
	t.Helper()
	bs := p.cli(t, "bootstrap", "--grpc", "--node-id", nodeID, "--xds-address", p.xdsAddr)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bs))
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// rpc is one case: a method of grpc.testing.TestService and metadata.
type rpc struct {
	name    string
	method  string // UnaryCall or EmptyCall
	headers []string
}

// call makes one wait-for-ready RPC and returns its status code.
func call(c testgrpc.TestServiceClient, r rpc) codes.Code { return callWithin(c, r, 5*time.Second) }

// warm waits, within bound, until an RPC succeeds. grpc-go picks an RPC's
// route once, when it starts: an RPC started on an older config (the
// store's seeded quickstart also has a target greeter) waits on that
// config's cluster until its deadline, so each try has a short one.
func warm(t *testing.T, c testgrpc.TestServiceClient, r rpc) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for callWithin(c, r, time.Second) != codes.OK {
		if time.Now().After(deadline) {
			t.Fatalf("no RPC succeeded within %v", bound)
		}
	}
}

func callWithin(c testgrpc.TestServiceClient, r rpc, timeout time.Duration) codes.Code {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var kv []string
	for _, h := range r.headers {
		k, v, _ := strings.Cut(h, ":")
		kv = append(kv, strings.TrimSpace(k), strings.TrimSpace(v))
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	var err error
	if r.method == "EmptyCall" {
		_, err = c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.WaitForReady(true))
	} else {
		_, err = c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
	}
	return status.Code(err)
}

// explained is what `pylon explain -o json` printed.
type explained struct {
	Group   string       `json:"group"`
	Result  route.Result `json:"result"`
	Rollout *struct {
		Version string `json:"version"`
	} `json:"rollout"`
}

// expected is what explain says of an RPC: each backend port's share of
// the calls, or the status code every call fails with.
type expected struct {
	shares map[int]float64
	fails  codes.Code
	text   string
}

// expect turns an explanation into the share of calls each backend must
// take: a cluster's share split evenly over its serving endpoints (the
// configs here give every endpoint of a locality the same weight, and
// grpc-go round-robins within a locality).
func expect(t *testing.T, e explained) expected {
	t.Helper()
	r := e.Result
	out := expected{shares: map[int]float64{}, text: r.Outcome}
	if r.GRPCStatus != "" {
		out.fails = codes.Unavailable
		if r.GRPCStatus != "UNAVAILABLE" {
			t.Fatalf("explain says the RPC fails with %s; the harness knows UNAVAILABLE", r.GRPCStatus)
		}
		return out
	}
	for _, c := range r.Clusters {
		var serving []route.Endpoint
		for _, ep := range c.Endpoints {
			if ep.Serving {
				serving = append(serving, ep)
			}
		}
		for _, ep := range serving {
			_, p, err := net.SplitHostPort(ep.Address)
			if err != nil {
				t.Fatal(err)
			}
			port, _ := strconv.Atoi(p)
			out.shares[port] += c.Share / float64(len(serving))
		}
	}
	return out
}

// check makes n RPCs and compares where they went with what explain said:
// every call fails with the code it said, or each backend's share of the
// calls is within five standard deviations of a binomial draw (plus 1%)
// of the share it said; a backend it gave no share takes no call.
func check(t *testing.T, bs *backends, c testgrpc.TestServiceClient, r rpc, want expected, n int) {
	t.Helper()
	bs.counts()
	failed := map[codes.Code]int{}
	for range n {
		if code := call(c, r); code != codes.OK {
			failed[code]++
		}
	}
	got := bs.counts()
	if want.fails != codes.OK {
		if failed[want.fails] != n {
			t.Errorf("%s: explain says every call fails with %v (%s); the client: %v failed, calls served %v", r.name, want.fails, want.text, failed, got)
		}
		return
	}
	if len(failed) > 0 {
		t.Errorf("%s: %v calls failed; explain says %s", r.name, failed, want.text)
		return
	}
	var problems []string
	for _, port := range bs.ports {
		p, seen := want.shares[port], float64(got[port])/float64(n)
		tol := 5*math.Sqrt(p*(1-p)/float64(n)) + 0.01
		if p == 0 || p == 1 {
			tol = 0
		}
		if math.Abs(seen-p) > tol {
			problems = append(problems, fmt.Sprintf("backend :%d took %.3f of the calls, explain says %.3f (±%.3f)", port, seen, p, tol))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Errorf("%s (%s): %s", r.name, want.text, strings.Join(problems, "; "))
	}
}

// explainRPC runs `pylon explain -o json` for an RPC on target.
func explainRPC(t *testing.T, p *pylon, source []string, nodeID, target string, r rpc) explained {
	t.Helper()
	args := append([]string{"explain", "-o", "json", "--node", nodeID}, source...)
	args = append(args, "xds:///"+target+"/grpc.testing.TestService/"+r.method)
	for _, h := range r.headers {
		args = append(args, "-H", h)
	}
	var e explained
	if err := json.Unmarshal([]byte(p.cli(t, args...)), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pylon.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
