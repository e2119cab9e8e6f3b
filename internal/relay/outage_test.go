package relay_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// port is the endpoint port a delta response of endpoints carries (0:
// none).
func port(t *testing.T, resp *discoveryv3.DeltaDiscoveryResponse) uint32 {
	t.Helper()
	for _, r := range resp.GetResources() {
		var cla endpointv3.ClusterLoadAssignment
		if err := r.GetResource().UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		for _, e := range cla.GetEndpoints() {
			for _, lb := range e.GetLbEndpoints() {
				return lb.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
			}
		}
	}
	return 0
}

// subscribeEndpoints opens a delta ADS stream of cluster e2e on the relay
// and returns it with the port of its first endpoints response.
func subscribeEndpoints(t *testing.T, relayAddr, id string) (*xdstest.DeltaStream, uint32) {
	t.Helper()
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, relayAddr), &corev3.Node{Id: id, Cluster: "e2e"})
	s.Subscribe(xdstype.EndpointURL, "greeter-backends")
	resp := s.RecvType(xdstype.EndpointURL)
	s.ACK(resp)
	return s, port(t, resp)
}

// nextPort waits for the stream's next endpoints response and returns its
// port.
func nextPort(t *testing.T, s *xdstest.DeltaStream) uint32 {
	t.Helper()
	resp := s.RecvType(xdstype.EndpointURL)
	s.ACK(resp)
	return port(t, resp)
}

// TestRelayServesThroughUpstreamOutageAndRestartFromDataDir: the upstream
// stopped, a downstream proxy keeps its config (nothing removed); a relay
// restarted meanwhile serves the config kept in its data folder to a new
// proxy at once; the upstream back, a change reaches that proxy.
func TestRelayServesThroughUpstreamOutageAndRestartFromDataDir(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	addr := up.d.XDS
	dataDir := t.TempDir()
	rd := startRelay(t, []string{addr}, dataDir, daemon.RelayOptions{})
	s1, p := subscribeEndpoints(t, rd.xds, "proxy-1")
	if p != 9001 {
		t.Fatalf("endpoints through the relay on port %d, want 9001", p)
	}

	up.d.Stop(t)
	if !eventually(func() bool { k := rd.r.Keys(); return len(k) == 1 && !k[0].Connected }) {
		t.Fatal("the relay did not see the upstream go")
	}
	s1.ExpectSilence() // nothing removed, nothing changed

	rd.stop()
	rd = startRelay(t, []string{addr}, dataDir, daemon.RelayOptions{})
	s2, p := subscribeEndpoints(t, rd.xds, "proxy-2")
	if p != 9001 {
		t.Fatalf("the restarted relay served endpoints on port %d from its data folder, want 9001", p)
	}

	up.restartOn(t, greeter(9002))
	if p := nextPort(t, s2); p != 9002 {
		t.Fatalf("after the upstream's return the proxy got port %d, want the upstream's new 9002", p)
	}
}

// TestDownstreamNACKShowsUpstream: a proxy NACKing what the relay sent
// makes the relay's upstream stream NACK that type, with the proxy's
// error detail: the upstream's status shows it from the relay's node.
func TestDownstreamNACKShowsUpstream(t *testing.T) {
	up := startUpstream(t, "", greeter(9001))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: "picky-proxy", Cluster: "e2e"})
	s.Subscribe(xdstype.ClusterURL, "*")
	s.NACK(s.RecvType(xdstype.ClusterURL), "cluster greeter-backends: unsupported lb_policy")

	var detail string
	if !eventually(func() bool {
		for _, st := range open(proxies(t, up.d.Admin, up.read)) {
			if st.Node != "relay-test/e2e" {
				continue
			}
			for _, ty := range st.Types {
				if ty.Type == "CDS" && ty.LastNACK != nil {
					detail = ty.LastNACK.Detail
					return true
				}
			}
		}
		return false
	}) {
		t.Fatal("the upstream's status shows no CDS NACK from the relay's node relay-test/e2e")
	}
	for _, want := range []string{"picky-proxy", "unsupported lb_policy", "relay-test"} {
		if !strings.Contains(detail, want) {
			t.Errorf("upstream NACK detail %q does not name %q", detail, want)
		}
	}
	if m := metricsText(t, rd.admin); !strings.Contains(m, "\npylon_relay_nacks_reported_total 1\n") {
		t.Error("the relay's /metrics does not count the NACK it reported")
	}
}

// TestRelayFailsOverToTheNextUpstream: with the first upstream gone, the
// relay's stream moves to the second, whose config reaches the proxies.
func TestRelayFailsOverToTheNextUpstream(t *testing.T) {
	a := startUpstream(t, "", greeter(9001))
	b := startUpstream(t, "", greeter(9002))
	rd := startRelay(t, []string{a.d.XDS, b.d.XDS}, "", daemon.RelayOptions{})
	s, p := subscribeEndpoints(t, rd.xds, "proxy-1")
	if p != 9001 {
		t.Fatalf("endpoints on port %d, want the first upstream's 9001", p)
	}
	a.d.Stop(t)
	if p := nextPort(t, s); p != 9002 {
		t.Fatalf("after the first upstream stopped the proxy got port %d, want the second's 9002", p)
	}
	if k := rd.r.Keys(); len(k) != 1 || k[0].Upstream != b.d.XDS {
		t.Fatalf("relay keys %+v, want one on %s", k, b.d.XDS)
	}
}
