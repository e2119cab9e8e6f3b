package relay_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// ttlConfig is envoyConfig with a Runtime layer "flags" of a 1s TTL.
func ttlConfig() string {
	return envoyConfig("c1") + `- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  "@ttl": 1s
  name: flags
  layer: { feature_x: true }
`
}

var ttlNode = &corev3.Node{Id: "envoy-ttl", Cluster: "e2e", ClientFeatures: []string{"xds.config.supports-resource-ttl"}}

// subscribeFlags opens a delta ADS stream on the relay for every listener
// and the runtime layer "flags", and checks that flags comes with its TTL.
func subscribeFlags(t *testing.T, relayAddr string) *xdstest.DeltaStream {
	t.Helper()
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, relayAddr), ttlNode)
	s.Subscribe(xdstype.ListenerURL, "*")
	s.ACK(s.RecvType(xdstype.ListenerURL))
	s.Subscribe(xdstype.RuntimeURL, "flags")
	r := s.RecvType(xdstype.RuntimeURL)
	if len(r.Resources) != 1 || r.Resources[0].GetResource() == nil || r.Resources[0].GetTtl().AsDuration() != time.Second {
		t.Fatalf("the proxy got %v, want flags with its TTL of 1s", r.Resources)
	}
	s.ACK(r)
	return s
}

// TestRelayRefreshesATTLdResourceWhileItsUpstreamDoes: with the upstream
// up, a proxy of the relay keeps a TTL'd resource past several TTLs: it
// gets heartbeats of it, never its removal.
func TestRelayRefreshesATTLdResourceWhileItsUpstreamDoes(t *testing.T) {
	up := startUpstream(t, "", ttlConfig())
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	s := subscribeFlags(t, rd.xds)
	beats := 0
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); {
		r, err := s.NextWithin(time.Second)
		if err != nil {
			t.Fatalf("after %d heartbeats, none for a second (TTL 1s): %v", beats, err)
		}
		if len(r.RemovedResources) > 0 || r.TypeUrl != xdstype.RuntimeURL || len(r.Resources) != 1 || r.Resources[0].GetResource() != nil {
			t.Fatalf("after %d heartbeats the proxy got %s %v removed %v, want a heartbeat of flags", beats, r.TypeUrl, r.Resources, r.RemovedResources)
		}
		beats++
		s.ACK(r)
	}
	if beats < 4 {
		t.Fatalf("%d heartbeats in 3.5s of a 1s TTL, want at least 4", beats)
	}
}

// TestATTLdResourceExpiresThroughTheRelayWhenItsUpstreamStops: the
// upstream gone, the relay stops refreshing its TTL'd resource: the proxy
// is told it is removed about a TTL after the upstream's last refresh, as
// it would lose it talking to the upstream; its listeners stay.
func TestATTLdResourceExpiresThroughTheRelayWhenItsUpstreamStops(t *testing.T) {
	up := startUpstream(t, "", ttlConfig())
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	s := subscribeFlags(t, rd.xds)
	up.d.Stop(t)
	stopped := time.Now()
	for {
		r, err := s.NextWithin(time.Until(stopped.Add(5 * time.Second)))
		if err != nil {
			t.Fatalf("5s after the upstream stopped, flags (TTL 1s) not removed: %v", err)
		}
		if r.TypeUrl != xdstype.RuntimeURL {
			t.Fatalf("the upstream gone, the proxy got %s %v removed %v: only the TTL'd runtime layer may go", r.TypeUrl, r.Resources, r.RemovedResources)
		}
		s.ACK(r)
		if slices.Contains(r.RemovedResources, "flags") {
			break
		}
	}
	s.ExpectSilence() // the listeners stay
}

// TestRelayKeepsNoTTLdResourceInItsDataFolder: a relay restarted while its
// upstream is away serves what it kept, but not the TTL'd resource, which
// lived only as long as the upstream refreshed it.
func TestRelayKeepsNoTTLdResourceInItsDataFolder(t *testing.T) {
	up := startUpstream(t, "", ttlConfig())
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{})
	subscribeFlags(t, rd.xds)
	rd.stop()
	up.d.Stop(t)
	files, err := filepath.Glob(filepath.Join(rd.dataDir, "relay-keys", "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("kept files %v (%v), want one", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"ttl"`) || strings.Contains(string(b), `"flags"`) {
		t.Fatalf("the kept file holds the TTL'd resource: %s", b)
	}
	again := startRelay(t, []string{up.d.XDS}, rd.dataDir, daemon.RelayOptions{})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, again.xds), ttlNode)
	s.Subscribe(xdstype.ListenerURL, "*")
	if l := s.RecvType(xdstype.ListenerURL); len(l.Resources) != 1 {
		t.Fatalf("from the data folder the proxy got listeners %v, want ingress", l.Resources)
	}
	s.Subscribe(xdstype.RuntimeURL, "flags")
	r := s.RecvType(xdstype.RuntimeURL)
	if slices.ContainsFunc(r.Resources, func(res *discoveryv3.Resource) bool { return res.GetName() == "flags" }) {
		t.Fatalf("from the data folder the proxy got %v, want no flags (TTL'd, its upstream away)", r.Resources)
	}
}
