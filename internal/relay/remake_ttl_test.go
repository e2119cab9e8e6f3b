package relay_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// remakeGroups is edge (cluster site-a, with the runtime layer flags of a
// 4s TTL in its scope) and mesh; with other, a rule ranked first taking
// the nodes whose id is relay-test/* (the node edge's key announces
// upstream) into a group of its own.
func remakeGroups(other bool) string {
	first := ""
	if other {
		first = `- name: other
  match: { id: "relay-test/*" }
  scope: { clusters: [c-mesh] }
`
	}
	return `groups:
` + first + `- name: edge
  match: { cluster: site-a }
  scope: { clusters: [c-edge], runtimes: [flags] }
- name: mesh
  match: { cluster: mesh }
  scope: { clusters: [c-mesh] }
services:
- name: c-edge
  endpoints: [{ address: 127.0.0.1, port: 9001 }]
- name: c-mesh
  endpoints: [{ address: 127.0.0.1, port: 9002 }]
resources:
- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  "@ttl": 4s
  name: flags
  layer: { feature_x: true }
`
}

// TestARemadeKeyDoesNotKeepATTLdResourceAlive: the xDS upstream
// (u1) stops; the group rules (read from another Pylon, u2) then change
// so that edge's key is made again (remake). The new key serves the old
// key's snapshot until its own stream's config comes, which never does
// (u1 is gone). The TTL'd runtime layer must still expire about a TTL
// after u1's last refresh, as it does without the remake; a copy of the
// snapshot must not keep it alive, heartbeated by the relay.
func TestARemadeKeyDoesNotKeepATTLdResourceAlive(t *testing.T) {
	t.Run("remade", func(t *testing.T) { remakeTTL(t, true) })
	t.Run("control, no rule change", func(t *testing.T) { remakeTTL(t, false) })
}

func remakeTTL(t *testing.T, change bool) {
	u1 := startUpstream(t, "", remakeGroups(false))
	u2 := startUpstream(t, "", remakeGroups(false))
	rd := startRelay(t, []string{u1.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + u2.d.Admin, UpstreamReadTokenFile: filepath.Join(u2.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond,
	})
	node := &corev3.Node{Id: "p-1", Cluster: "site-a", ClientFeatures: []string{"xds.config.supports-resource-ttl"}}
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), node)
	s.Subscribe(xdstype.ClusterURL, "*")
	s.ACK(s.RecvType(xdstype.ClusterURL))
	s.Subscribe(xdstype.RuntimeURL, "flags")
	r := s.RecvType(xdstype.RuntimeURL)
	if len(r.Resources) != 1 || r.Resources[0].GetResource() == nil {
		t.Fatalf("p-1 got %v, want flags", r.Resources)
	}
	s.ACK(r)

	u1.d.Stop(t)
	stopped := time.Now()
	if change {
		writeAtomically(t, u2.cfg, remakeGroups(true))
	}
	beats := 0
	for end := stopped.Add(14 * time.Second); time.Now().Before(end); {
		r, err := s.NextWithin(time.Until(end))
		if err != nil {
			break
		}
		s.ACK(r)
		if r.TypeUrl == xdstype.RuntimeURL && len(r.Resources) == 1 && r.Resources[0].GetResource() == nil {
			beats++
		}
		if r.TypeUrl == xdstype.RuntimeURL && slices.Contains(r.RemovedResources, "flags") {
			t.Logf("flags removed %v after the upstream stopped", time.Since(stopped).Round(100*time.Millisecond))
			return
		}
	}
	var keys []string
	for _, k := range rd.r.Keys() {
		// Streams: the upstream streams its client opened; 0 for the
		// remade key, whose client never reached the stopped upstream.
		keys = append(keys, fmt.Sprintf("%s: upstream streams %d, proxies %d", k.Key, k.Streams, k.Proxies))
	}
	t.Fatalf("14s after the upstream stopped, flags (TTL 4s) was not removed from p-1, which got %d heartbeats of it meanwhile: the remade key's copied snapshot keeps it alive (keys %s)", beats, strings.Join(keys, ","))
}
