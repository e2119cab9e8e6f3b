package relay

import (
	"context"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// startKeptRelay runs a relay keyed by cluster in front of upstreamAddr,
// keeping its keys in dataDir, and an xDS server of it; both end with the
// returned stop.
func startKeptRelay(t *testing.T, upstreamAddr, dataDir string) (front *xdstest.Server, stop func()) {
	t.Helper()
	pool := upstream.NewPool(nil, 0, 0)
	tmpl, _ := ParseTemplate("{cluster}")
	reg, pub := xdstype.New(), fleet.NewPublisher()
	r := New(Options{Upstreams: []string{upstreamAddr}, Pool: pool, Template: tmpl, ID: "relay", Registry: reg, Publisher: pub, DataDir: dataDir})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	front = xdstest.Start(t, xds.Options{Registry: reg, Fleets: pub, Admit: r.Admit})
	return front, func() {
		cancel()
		r.Close()
		pool.Close()
	}
}

// aliasAnswer asks the front server, on a new delta stream, for the alias
// (edge/api.example.com without one) and returns the names and aliases
// answered.
func aliasAnswer(t *testing.T, front *xdstest.Server, alias ...string) (names []string, aliases []string, body bool) {
	t.Helper()
	if len(alias) == 0 {
		alias = []string{"edge/api.example.com"}
	}
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, front.Addr), xdstest.Node("p"))
	s.Subscribe(xdstype.VirtualHostURL, alias...)
	got := s.RecvType(xdstype.VirtualHostURL)
	s.ACK(got)
	body = len(got.Resources) > 0
	for _, r := range got.Resources {
		names = append(names, r.Name)
		aliases = append(aliases, r.Aliases...)
		body = body && r.Resource != nil
	}
	return names, aliases, body
}

// TestRelayRestartedDuringAnOutageServesTheAliasesItKept: the virtual
// hosts a key's proxies asked for by alias (VHDS) are kept in the data
// folder with their route configurations and the aliases they came for:
// a relay restarted while its upstream is away answers a delta proxy
// asking for such an alias with the virtual host, as before.
func TestRelayRestartedDuringAnOutageServesTheAliasesItKept(t *testing.T) {
	rc := xdstest.Route("edge", "c")
	rc.VirtualHosts[0].Domains = []string{"base.example.com"}
	rc.Vhds = &routev3.Vhds{ConfigSource: xdstest.ADS()}
	api := xdstest.Route("edge/api", "c").VirtualHosts[0]
	api.Domains = []string{"api.example.com"}
	up := xdstest.Start(t, xds.Options{})
	up.Publish(t, rc, api, xdstest.Cluster("c"), xdstest.Endpoints("c", 1))
	dataDir := t.TempDir()

	front, stop := startKeptRelay(t, up.Addr, dataDir)
	names, aliases, body := aliasAnswer(t, front)
	if !slices.Equal(names, []string{"edge/api"}) || !slices.Equal(aliases, []string{"edge/api.example.com"}) || !body {
		t.Fatalf("asked for alias edge/api.example.com: got %v for %v, want virtual host edge/api for it", names, aliases)
	}
	stop()

	front, stop = startKeptRelay(t, "127.0.0.1:1", dataDir)
	defer stop()
	// Another alias asked first changes what the key subscribes to: the
	// kept one stays.
	if names, _, body := aliasAnswer(t, front, "edge/web.example.com"); body {
		t.Fatalf("asked for alias edge/web.example.com, which nothing serves: got %v", names)
	}
	names, aliases, body = aliasAnswer(t, front)
	if !slices.Equal(names, []string{"edge/api"}) || !slices.Equal(aliases, []string{"edge/api.example.com"}) || !body {
		t.Fatalf("restarted from its data folder, upstream away, asked for alias edge/api.example.com: got %v for %v (with a body: %v), want virtual host edge/api for it", names, aliases, body)
	}
}
