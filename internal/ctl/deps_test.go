package ctl

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// heavy are the modules whose packages' inits make a binary start in tens
// of milliseconds (Envoy's protos, gRPC, etcd, client-go's scheme,
// Prometheus' registry): pylonctl links none of them, through ctl or
// through anything ctl imports. The bans in internal/layers say so of
// ctl's own imports; this is the whole graph.
var heavy = []string{
	"github.com/envoyproxy/",
	"github.com/prometheus/",
	"go.etcd.io/",
	"google.golang.org/grpc",
	"k8s.io/",
	"github.com/pylon-xds/pylon/internal/daemon",
	"github.com/pylon-xds/pylon/internal/cli",
}

func TestDependenciesStayLight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", ".", "../../cmd/pylonctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if strings.HasPrefix(dep, h) {
				t.Errorf("pylonctl links %s: a heavy package (prefix %s) makes every start pay its inits", dep, h)
			}
		}
	}
}
