package relay_test

import (
	"fmt"
	"maps"
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

// moverGroups is edge and mesh as movingGroups("site-a", "mesh"), with,
// when moved, a rule before them taking the nodes whose id is mover-*
// into mesh.
func moverGroups(moved bool) string {
	cfg := movingGroups("site-a", "mesh")
	if moved {
		cfg = strings.Replace(cfg, "groups:\n", `groups:
- name: mesh
  match: { id: "mover-*" }
  scope: { clusters: [c-mesh] }
`, 1)
		// One rule per group: the second mesh becomes a cluster match of
		// nothing relayed here.
		cfg = strings.Replace(cfg, "- name: mesh\n  match: { cluster: mesh }", "- name: mesh-too\n  match: { cluster: mesh }", 1)
	}
	return cfg
}

// TestConnectedProxyFollowsAGroupRuleChange: keyed by a Pylon upstream's
// groups, a proxy connected to the relay whose group changes upstream (a
// new rule takes its id into the other group, while the node its key's
// upstream stream announces stays where it was) moves to the other
// group's key and gets that group's config on the stream it has, holding
// some config at every response: the new group's arrives with the old
// one's removal, never after it. The other proxy of its old group keeps
// that group's config.
func TestConnectedProxyFollowsAGroupRuleChange(t *testing.T) {
	up := startUpstream(t, "", moverGroups(false))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond,
	})
	conn := xdstest.Dial(t, rd.xds)
	stay := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "stay-1", Cluster: "site-a"})
	stay.Subscribe(xdstype.ClusterURL, "*")
	if r := stay.RecvType(xdstype.ClusterURL); len(r.Resources) != 1 || r.Resources[0].Name != "c-edge" {
		t.Fatalf("stay-1 got %v, want edge's c-edge", r.Resources)
	}
	s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "mover-1", Cluster: "site-a"})
	s.Subscribe(xdstype.ClusterURL, "*")
	held := map[string]bool{}
	apply := func() {
		r := s.RecvType(xdstype.ClusterURL)
		for _, res := range r.Resources {
			held[res.Name] = true
		}
		for _, name := range r.RemovedResources {
			delete(held, name)
		}
		s.ACK(r)
		if len(held) == 0 {
			t.Fatalf("mover-1 holds no cluster after response %s: it lost its config", r.Nonce)
		}
	}
	apply()
	if got := slices.Sorted(maps.Keys(held)); !slices.Equal(got, []string{"c-edge"}) {
		t.Fatalf("mover-1 holds %v, want edge's c-edge", got)
	}

	writeAtomically(t, up.cfg, moverGroups(true))
	deadline := time.Now().Add(bound)
	for !slices.Equal(slices.Sorted(maps.Keys(held)), []string{"c-mesh"}) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v mover-1 holds %v, want mesh's c-mesh: it did not follow the rule", bound, slices.Sorted(maps.Keys(held)))
		}
		apply()
	}
	counts := map[string]int{}
	for _, k := range rd.r.Keys() {
		counts[k.Key] = k.Proxies
	}
	if counts["mesh"] != 1 || counts["edge"] != 1 {
		t.Errorf("keys' proxies %v, want mover-1 on mesh's key and stay-1 on edge's", counts)
	}
}

// movingGroups is two node groups, edge and mesh, each with a cluster of
// its own; edge takes the nodes of cluster edgeCluster, mesh those of
// meshCluster.
func movingGroups(edgeCluster, meshCluster string) string {
	return fmt.Sprintf(`groups:
- name: edge
  match: { cluster: %s }
  scope: { clusters: [c-edge] }
- name: mesh
  match: { cluster: %s }
  scope: { clusters: [c-mesh] }
services:
- name: c-edge
  endpoints: [{ address: 127.0.0.1, port: 9001 }]
- name: c-mesh
  endpoints: [{ address: 127.0.0.1, port: 9002 }]
`, edgeCluster, meshCluster)
}

// TestKeyWhoseUpstreamNodeChangedGroupIsMadeAgain: keyed by a Pylon
// upstream's groups, the rule moved to take cluster site-a into mesh: the
// connected proxy of site-a follows (holding some config at every
// response), counts for mesh's key, and edge's key, whose upstream
// stream announced a node of site-a (which the upstream now puts in
// mesh), is made again for the next proxy of edge's: it gets edge's
// config, not mesh's.
func TestKeyWhoseUpstreamNodeChangedGroupIsMadeAgain(t *testing.T) {
	up := startUpstream(t, "", movingGroups("site-a", "mesh"))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond,
	})
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: "p-1", Cluster: "site-a"})
	s.Subscribe(xdstype.ClusterURL, "*")
	held := map[string]bool{}
	apply := func() {
		r := s.RecvType(xdstype.ClusterURL)
		for _, res := range r.Resources {
			held[res.Name] = true
		}
		for _, name := range r.RemovedResources {
			delete(held, name)
		}
		s.ACK(r)
		if len(held) == 0 {
			t.Fatalf("the proxy holds no cluster after response %s: it lost its config", r.Nonce)
		}
	}
	apply()
	if got := slices.Sorted(maps.Keys(held)); !slices.Equal(got, []string{"c-edge"}) {
		t.Fatalf("the proxy of cluster site-a holds %v, want edge's c-edge", got)
	}

	writeAtomically(t, up.cfg, movingGroups("elsewhere", "site-a"))
	deadline := time.Now().Add(bound)
	for !slices.Equal(slices.Sorted(maps.Keys(held)), []string{"c-mesh"}) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v the connected proxy holds %v, want mesh's c-mesh: it did not follow the rule", bound, slices.Sorted(maps.Keys(held)))
		}
		apply()
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, k := range rd.r.Keys() {
			out[k.Key] = k.Proxies
		}
		return out
	}
	if !eventually(func() bool { c := counts(); return c["mesh"] == 1 && c["edge"] == 0 }) {
		t.Fatalf("keys' proxies %v, want the proxy counted for mesh, its new group's key", counts())
	}
	// edge's key announced a node of cluster site-a upstream, which the
	// upstream now puts in mesh: a new proxy of edge's must still get
	// edge's config, not mesh's.
	s2 := xdstest.OpenDeltaADS(t, xdstest.Dial(t, rd.xds), &corev3.Node{Id: "p-2", Cluster: "elsewhere"})
	s2.Subscribe(xdstype.ClusterURL, "*")
	var got []string
	if !eventually(func() bool {
		r, err := s2.NextWithin(bound)
		if err != nil {
			return false
		}
		got = nil
		for _, res := range r.Resources {
			got = append(got, res.Name)
		}
		s2.ACK(r)
		return slices.Equal(got, []string{"c-edge"})
	}) {
		t.Fatalf("a new proxy of edge's cluster holds %v, want edge's c-edge", got)
	}
}
