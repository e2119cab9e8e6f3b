package relay_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestRelayServesTheRuntimeLayersItsProxiesName: a Runtime layer is named
// by the proxy's bootstrap, never by another resource, and the relay sees
// no bootstrap: it takes its key's layers whole from the upstream, and a
// proxy asking for one by name gets it through the relay, SotW and delta.
func TestRelayServesTheRuntimeLayersItsProxiesName(t *testing.T) {
	up := startUpstream(t, "", envoyConfig("c1")+`- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  name: flags
  layer: { feature_x: true }
`)
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	conn := xdstest.Dial(t, rd.xds)
	node := func(id string) *corev3.Node { return &corev3.Node{Id: id, Cluster: "e2e"} }
	s := xdstest.OpenADS(t, conn, node("sotw"))
	s.Request(xdstype.RuntimeURL, "flags")
	if resp := s.RecvType(xdstype.RuntimeURL); len(resp.Resources) != 1 {
		t.Errorf("SotW: %d runtime layers, want flags", len(resp.Resources))
	}
	d := xdstest.OpenDeltaADS(t, conn, node("delta"))
	d.Subscribe(xdstype.RuntimeURL, "flags")
	if resp := d.RecvType(xdstype.RuntimeURL); len(resp.Resources) != 1 || resp.Resources[0].Name != "flags" {
		t.Errorf("delta: runtime layers %v, want flags", resp.Resources)
	}
}
