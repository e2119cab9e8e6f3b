package relay_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestRelayReachesItsUpstreamOverMutualTLS: an upstream that requires
// client certificates serves the relay, which presents its own; the
// upstream sees the relay's identity. Without the certificate the relay
// gets nothing, and says its key is not connected.
func TestRelayReachesItsUpstreamOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "relay-test-ca")
	server := ca.Issue(t, certstest.Server("pylon-1")).Write(t, ca, dir, "server")
	client := ca.Issue(t, certstest.Client("spiffe://example.org/relay/site-1")).Write(t, ca, dir, "relay")
	up := startUpstreamWith(t, "", greeter(9001), func(o *daemon.Options) {
		o.XDSTLS = daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA}
		o.XDSRequireClientCert = true
	})

	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{UpstreamCA: server.CA, UpstreamCert: client.Cert, UpstreamKey: client.Key})
	if _, p := subscribeEndpoints(t, rd.xds, "proxy-1"); p != 9001 {
		t.Fatalf("endpoints through the relay over mTLS on port %d, want 9001", p)
	}
	streams := open(proxies(t, up.d.Admin, up.read))
	if len(streams) != 1 || streams[0].Identity != "spiffe://example.org/relay/site-1" {
		t.Fatalf("upstream streams %+v, want the relay's with its certificate's identity", streams)
	}

	bare := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{UpstreamCA: server.CA})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, bare.xds), &corev3.Node{Id: "proxy-2", Cluster: "e2e"})
	s.Subscribe(xdstype.ClusterURL, "*")
	if resp, err := s.NextWithin(time.Second); err == nil {
		t.Fatalf("a relay without a client certificate served %d resources", len(resp.GetResources()))
	}
	if k := bare.r.Keys(); len(k) != 1 || k[0].Connected {
		t.Fatalf("keys %+v, want one, not connected", k)
	}
	if n := len(open(proxies(t, up.d.Admin, up.read))); n != 1 {
		t.Fatalf("the upstream serves %d streams, want the first relay's alone", n)
	}
}
