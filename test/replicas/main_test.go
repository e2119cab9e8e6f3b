// Package replicas_test runs three real `pylon serve` processes on one
// embedded etcd and kills, stops and signals them, and etcd, under real
// clients (issue 14, "Must show"): a write through one replica reaches the
// proxies of another, a proxy whose replica dies with SIGKILL reconnects to
// another and is resent nothing, no acknowledged write is lost when a
// replica or the etcd leader dies mid-write, and etcd stopped and
// restarted under connected proxies costs them nothing.
//
// Every replica is a child process built from ./cmd/pylon once per run;
// etcd is embedded in this test process on loopback; clients reach a
// replica directly or through a small TCP forwarder that stands for a load
// balancer in front of the replicas.
package replicas_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// repo is the repository's root, from this package's folder.
const repo = "../.."

// buildBound bounds the build of the pylon binary (a cold build cache
// compiles grpc, etcd's client and the Envoy protos).
const buildBound = 5 * time.Minute

// pylonBin is the pylon binary the tests run, built by TestMain before any
// test starts and never changed after: the one value a test binary's
// TestMain can hand to its tests.
var pylonBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pylon-replicas-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := 2
	if pylonBin, err = buildPylon(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	// Every replica is reaped, every forwarder, client and grpc-go xDS
	// client closed by the test that started it. The options ignore
	// etcd's peer HTTP connections of a stopped cluster: the tests close
	// their own HTTP clients' idle connections.
	if code == 0 {
		if err := goleak.Find(etcdtest.LeakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildPylon builds ./cmd/pylon into dir, within buildBound. The child
// needs no race detector: the race-checked code under test here is the
// test's own (clients, forwarder); the daemon's packages are race-tested
// in process by their own tests and test/integration.
func buildPylon(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildBound)
	defer cancel()
	bin := filepath.Join(dir, "pylon")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/pylon")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pylon: %v\n%s", err, out)
	}
	return bin, nil
}
