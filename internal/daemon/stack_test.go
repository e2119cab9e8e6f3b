package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// stackConfig is 20 services, a route table naming them and a listener;
// port moves every service's endpoint.
func stackConfig(port int) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "- { name: svc-%d, endpoints: [{ address: 10.0.0.%d, port: %d }] }\n", i, i+1, port)
	}
	b.WriteString("routes:\n- name: r\n  virtual_hosts:\n  - name: v\n    domains: [\"*\"]\n    routes:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "    - { match: { prefix: /svc-%d/ }, to: [{ service: svc-%d }] }\n", i, i)
	}
	b.WriteString("listeners:\n- { name: l, port: 8080, routes: r }\n")
	return b.String()
}

// stackStep is a type a stream of the stack test takes, and its names.
type stackStep struct {
	url   string
	names []string
}

// stackSteps are the four types a stream takes, in Envoy's order, with
// the assignments of names and the route table r.
func stackSteps(names []string) []stackStep {
	return []stackStep{{xdstype.ClusterURL, nil}, {xdstype.EndpointURL, names}, {xdstype.ListenerURL, nil}, {xdstype.RouteURL, []string{"r"}}}
}

// openDeltas opens per delta ADS streams on cc, each taking the four types
// and ACKing them.
func openDeltas(t *testing.T, cc *grpc.ClientConn, c, per int, names []string) []*xdstest.DeltaStream {
	var out []*xdstest.DeltaStream
	for i := range per {
		s := xdstest.OpenDeltaADS(t, cc, xdstest.Node(fmt.Sprintf("d-%d-%d", c, i)))
		for _, step := range stackSteps(names) {
			s.Subscribe(step.url, step.names...)
			s.ACK(s.RecvType(step.url))
		}
		out = append(out, s)
	}
	return out
}

// TestStreamStacksStayAt8KB guards the memory of an idle stream in the
// daemon as deployed (status tracking, metrics): its one goroutine, gRPC's
// handler waiting in RecvMsg, keeps an 8 KB stack only if nothing the
// stream ran took it past 8 KB. Grown to 16 KB once, it cannot shrink back
// while it waits (gRPC's frames under the handler with the runtime's
// allowance exceed a quarter of 8 KB): 8 KB more for every proxy. The
// streams, SotW and delta, take a first config and a change, as a
// fleet's do; the bound
// counts the test client's goroutines (about 10 KB a stream) as well.
func TestStreamStacksStayAt8KB(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation enlarges every frame, so stack sizes say nothing of a real build; .ci/run runs this test without -race")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	write := func(port int) {
		tmp := cfg + ".tmp"
		if err := os.WriteFile(tmp, []byte(stackConfig(port)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
	}
	write(80)
	d := daemontest.Start(t, daemon.Options{ConfigPath: cfg, XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Resync: -1})
	stacks := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.StackInuse
	}
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%d", i)
	}
	before := stacks()
	const conns, per = 4, 100
	var streams []*xdstest.Stream
	var deltas []*xdstest.DeltaStream
	for c := range conns {
		cc := xdstest.Dial(t, d.XDS)
		if c%2 == 1 {
			deltas = append(deltas, openDeltas(t, cc, c, per, names)...)
			continue
		}
		for i := range per {
			s := xdstest.OpenADS(t, cc, xdstest.Node(fmt.Sprintf("n-%d-%d", c, i)))
			for _, step := range stackSteps(names) {
				s.Request(step.url, step.names...)
				s.RecvType(step.url)
				s.Request(step.url, step.names...)
			}
			streams = append(streams, s)
		}
	}
	write(81)
	for _, s := range streams {
		s.RecvType(xdstype.EndpointURL)
	}
	for _, s := range deltas {
		s.ACK(s.RecvType(xdstype.EndpointURL))
	}
	perStream := float64(stacks()-before) / (conns * per)
	t.Logf("stacks: %.1f KB a stream (server and test client)", perStream/1024)
	if perStream > 22<<10 {
		t.Errorf("stacks take %.1f KB a stream: a stream's goroutine grew past 8 KB (about 18-19 KB a stream, server and client together, when it does not)", perStream/1024)
	}
}
