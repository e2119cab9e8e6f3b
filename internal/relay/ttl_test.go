package relay_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestRelayCarriesAResourcesTTL: a resource the upstream sends with a TTL
// (X41) reaches a proxy of the relay with it, and the relay, which serves
// it, refreshes it with heartbeats; it is kept in the data folder with it.
func TestRelayCarriesAResourcesTTL(t *testing.T) {
	up := startUpstream(t, "", envoyConfig("c1")+`- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  "@ttl": 1s
  name: flags
  layer: { feature_x: true }
`)
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	node := &corev3.Node{Id: "envoy-ttl", Cluster: "e2e", ClientFeatures: []string{"xds.config.supports-resource-ttl"}}
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), node)
	s.Subscribe(xdstype.RuntimeURL, "flags")
	r := s.RecvType(xdstype.RuntimeURL)
	if len(r.Resources) != 1 || r.Resources[0].GetTtl().AsDuration() != time.Second {
		t.Fatalf("the proxy got %v, want flags with its TTL of 1s", r.Resources)
	}
	s.ACK(r)
	if hb := s.RecvType(xdstype.RuntimeURL); len(hb.Resources) != 1 || hb.Resources[0].GetResource() != nil {
		t.Fatalf("after the TTL's refresh period the proxy got %v, want a heartbeat of flags", hb.Resources)
	}
	rd.stop()
	again := startRelay(t, []string{"127.0.0.1:1"}, rd.dataDir, daemon.RelayOptions{})
	s = xdstest.OpenDeltaADS(t, xdstest.Dial(t, again.xds), node)
	s.Subscribe(xdstype.RuntimeURL, "flags")
	if r := s.RecvType(xdstype.RuntimeURL); len(r.Resources) != 1 || r.Resources[0].GetTtl().AsDuration() != time.Second {
		t.Fatalf("from the data folder the proxy got %v, want flags with its TTL of 1s", r.Resources)
	}
}
