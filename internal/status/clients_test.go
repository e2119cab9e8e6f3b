package status_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/status"
)

// The user agents below are what each client sent on the wire (a probe
// ADS server logging the first request's node): grpc-go v1.85.0,
// Debian's python3-grpcio 1.51.1 (C-core), @grpc/grpc-js-xds 1.14.1.
const (
	goAgent   = "gRPC Go 1.85.0"
	coreAgent = "gRPC C-core linux Python C-core 29.0.0 Python 1.51.1"
	jsAgent   = "gRPC Node Pure JS 1.14.1"
)

// TestImplementationIsReadFromTheUserAgent: each client's user agent
// reads as its implementation and version; Envoy as Envoy; anything else
// as nothing; a version is bounded and printable, whatever it claims.
func TestImplementationIsReadFromTheUserAgent(t *testing.T) {
	for _, c := range []struct{ client, impl, version string }{
		{goAgent, status.ImplGo, "1.85.0"},
		{coreAgent, status.ImplCore, "29.0.0 Python 1.51.1"},
		{"gRPC C-core linux C-core 1.70.0", status.ImplCore, "1.70.0"},
		{jsAgent, status.ImplJS, "1.14.1"},
		{"envoy 1.30.1", status.ImplEnvoy, "1.30.1"},
		{"xdstest ", "", ""},
		{"", "", ""},
		{"gRPC Go 1.85\x1b[31m" + strings.Repeat("9", 100), status.ImplGo, "1.85[31m" + strings.Repeat("9", 24) + "..."},
	} {
		impl, version := status.Implementation(c.client)
		if impl != c.impl || version != c.version {
			t.Errorf("Implementation(%q) = %q, %q; want %q, %q", c.client, impl, version, c.impl, c.version)
		}
	}
}

func open(node, group, client string) status.Stream {
	return status.Stream{Node: node, Group: group, Client: client, Since: time.Now()}
}

// TestClientWarnings_NameGroupsWhoseConnectedGRPCClientsTheyDoNotState:
// a group stating no clients whose proxies include gRPC clients is named
// with the clients seen; a group stating some is named with each
// connected client it omits; a group whose clients are all stated, one of
// Envoys only, a stream gone, and nodes of no group, are not.
func TestClientWarnings_NameGroupsWhoseConnectedGRPCClientsTheyDoNotState(t *testing.T) {
	rules := nodegroup.Groups{
		{Name: "unstated"},
		{Name: "partial", Clients: []string{"grpc-go"}},
		{Name: "covered", Clients: []string{"grpc-go", "grpc-js"}},
		{Name: "envoys"},
		{Name: "quiet"},
	}
	gone := open("g1", "quiet", jsAgent)
	at := time.Now()
	gone.Gone = &at
	streams := []status.Stream{
		open("u1", "unstated", goAgent), open("u2", "unstated", coreAgent), open("u3", "unstated", goAgent),
		open("p1", "partial", goAgent), open("p2", "partial", jsAgent),
		open("c1", "covered", goAgent), open("c2", "covered", jsAgent),
		open("e1", "envoys", "envoy 1.30.1"), open("x1", "envoys", "xdstest "),
		gone, open("n1", status.NoGroup, coreAgent),
	}
	want := []string{
		`group "unstated" states no clients but proxyless gRPC clients are connected (grpc-core 29.0.0 Python 1.51.1, grpc-go 1.85.0): what it receives is checked against no client's rules; state them with ` + "`clients:`",
		`group "partial" states clients [grpc-go] but grpc-js 1.14.1 is connected: what it receives is not checked against what those accept; add them to ` + "`clients:`",
	}
	if diff := cmp.Diff(want, status.ClientWarnings(rules, streams)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestClientWarnings_AreBounded: however many versions claim to be
// connected, a warning names five and counts the rest.
func TestClientWarnings_AreBounded(t *testing.T) {
	var streams []status.Stream
	for i := range 40 {
		streams = append(streams, open(fmt.Sprint("n", i), "g", fmt.Sprintf("gRPC Node Pure JS 1.%02d.0", i)))
	}
	got := status.ClientWarnings(nodegroup.Groups{{Name: "g", Clients: []string{"grpc-go"}}}, streams)
	if len(got) != 1 || !strings.Contains(got[0], "grpc-js 1.00.0, grpc-js 1.01.0, grpc-js 1.02.0, grpc-js 1.03.0, grpc-js 1.04.0 and 35 more are connected") {
		t.Errorf("warnings: %q", got)
	}
}

// TestProxyShowsItsImplementation: a proxy's status names the
// implementation and version its stream's user agent reads as.
func TestProxyShowsItsImplementation(t *testing.T) {
	tr := status.NewTracker(status.Options{})
	tr.Seen(1, status.Info{Node: "n1", Agent: "gRPC C-core linux Python", AgentVersion: "C-core 29.0.0 Python 1.51.1"}, "g", time.Now())
	tr.Seen(2, status.Info{Node: "n2", Agent: "envoy", AgentVersion: "1.30.1"}, "g", time.Now())
	got := map[string][2]string{}
	for _, s := range tr.Streams() {
		got[s.Node] = [2]string{s.Implementation, s.ImplementationVersion}
	}
	want := map[string][2]string{"n1": {"grpc-core", "29.0.0 Python 1.51.1"}, "n2": {"envoy", "1.30.1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("implementations (-want +got):\n%s", diff)
	}
}
