package relay_test

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// fanIn is how many downstream proxies share one key in
// TestProxiesOfOneKeyShareOneUpstreamStream.
const fanIn = 200

// TestProxiesOfOneKeyShareOneUpstreamStream: 200 proxies of one cluster,
// half SotW and half delta, all get the upstream's config through the
// relay, and the upstream sees one stream: the relay's, for the key.
func TestProxiesOfOneKeyShareOneUpstreamStream(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	var conns []*grpc.ClientConn
	for range fanIn/50 + 1 {
		conns = append(conns, xdstest.Dial(t, rd.xds))
	}
	for i := range fanIn {
		node := &corev3.Node{Id: fmt.Sprintf("proxy-%d", i), Cluster: "e2e"}
		conn := conns[i%len(conns)]
		if i%2 == 0 {
			s := xdstest.OpenADS(t, conn, node)
			s.Request(xdstype.ClusterURL)
			if resp := s.RecvType(xdstype.ClusterURL); len(resp.Resources) != 1 {
				t.Fatalf("SotW proxy %d got %d clusters, want 1", i, len(resp.Resources))
			}
			continue
		}
		s := xdstest.OpenDeltaADS(t, conn, node)
		s.Subscribe(xdstype.ClusterURL, "*")
		if resp := s.RecvType(xdstype.ClusterURL); len(resp.Resources) != 1 || resp.Resources[0].Name != "greeter-backends" {
			t.Fatalf("delta proxy %d got %v, want the cluster greeter-backends", i, resp.Resources)
		}
	}
	streams := open(proxies(t, up.d.Admin, up.read))
	if len(streams) != 1 || streams[0].Node != "relay-test/e2e" {
		var nodes []string
		for _, s := range streams {
			nodes = append(nodes, s.Node)
		}
		t.Fatalf("the upstream serves %d streams (%v), want one: the relay's for key e2e", len(streams), nodes)
	}
	keys := rd.r.Keys()
	if len(keys) != 1 || keys[0].Proxies != fanIn || keys[0].Streams != 1 {
		t.Fatalf("relay keys %+v, want one key of %d proxies on one upstream stream", keys, fanIn)
	}
	m := metricsText(t, rd.admin)
	for _, want := range []string{"\npylon_relay_keys 1\n", "\npylon_relay_upstream_streams_total 1\n", "\npylon_relay_keys_connected 1\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("the relay's /metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestFiveThousandProxiesOneUpstreamStream is the figure: 5,000
// delta proxies of one key behind one relay, one upstream stream. Skipped
// with -short (it holds 10,000 streams in one process).
func TestFiveThousandProxiesOneUpstreamStream(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 proxies: skipped with -short")
	}
	const proxies5k = 5000
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	var conns []*grpc.ClientConn
	for range proxies5k/100 + 1 {
		conns = append(conns, xdstest.Dial(t, rd.xds))
	}
	streams := make([]*xdstest.DeltaStream, proxies5k)
	for i := range proxies5k {
		streams[i] = xdstest.OpenDeltaADS(t, conns[i%len(conns)], &corev3.Node{Id: fmt.Sprintf("proxy-%d", i), Cluster: "e2e"})
		streams[i].Subscribe(xdstype.ClusterURL, "*")
	}
	for i, s := range streams {
		if resp := s.RecvType(xdstype.ClusterURL); len(resp.Resources) != 1 {
			t.Fatalf("proxy %d got %d clusters, want 1", i, len(resp.Resources))
		}
	}
	up1 := open(proxies(t, up.d.Admin, up.read))
	if len(up1) != 1 || up1[0].Node != "relay-test/e2e" {
		t.Fatalf("the upstream serves %d streams, want one: the relay's for key e2e", len(up1))
	}
	if k := rd.r.Keys(); len(k) != 1 || k[0].Proxies != proxies5k || k[0].Streams != 1 {
		t.Fatalf("relay keys %+v, want one key of %d proxies on one upstream stream", k, proxies5k)
	}
}
