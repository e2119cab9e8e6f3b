package relay_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestKeysFirstProxyIsAnsweredForATypeItsConfigLacks: the first proxy of
// a key asks for the clusters of a config that has none; it is answered
// (no clusters), as Pylon answers it, not left waiting: Envoy waits for
// its first clusters' answer before it starts.
func TestKeysFirstProxyIsAnsweredForATypeItsConfigLacks(t *testing.T) {
	up := startUpstream(t, "", `resources:
- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  name: flags
  layer: { feature_x: true }
`)
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	for _, id := range []string{"first", "second"} {
		s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: id, Cluster: "e2e"})
		s.Subscribe(xdstype.ClusterURL, "*")
		if r := s.RecvType(xdstype.ClusterURL); len(r.Resources) != 0 {
			t.Fatalf("%s: %d clusters, want none", id, len(r.Resources))
		}
	}
}
