package relay_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// deadFirstGroups is a group "dead" (cluster dead) ranked first, then,
// when moved, a rule taking the nodes whose id is mover-* into mesh, then
// edge (cluster site-a) and mesh (cluster mesh).
func deadFirstGroups(moved bool) string {
	mover := ""
	if moved {
		mover = `- name: mesh
  match: { id: "mover-*" }
  scope: { clusters: [c-mesh] }
`
	}
	meshName := "mesh"
	if moved {
		meshName = "mesh-too" // one rule per group
	}
	return fmt.Sprintf(`groups:
- name: dead
  match: { cluster: dead }
  scope: { clusters: [c-dead] }
%s- name: edge
  match: { cluster: site-a }
  scope: { clusters: [c-edge] }
- name: %s
  match: { cluster: mesh }
  scope: { clusters: [c-mesh] }
services:
- name: c-dead
  endpoints: [{ address: 127.0.0.1, port: 9000 }]
- name: c-edge
  endpoints: [{ address: 127.0.0.1, port: 9001 }]
- name: c-mesh
  endpoints: [{ address: 127.0.0.1, port: 9002 }]
`, mover, meshName)
}

// TestAKeyWithoutConfigDoesNotHoldBackAGroupRuleChange: keyed by a Pylon
// upstream's groups, a key whose upstream never answers (routed to an
// address nothing listens on) with a proxy waiting on it, ranked before
// the group a change of the rules moves a connected proxy into (and not
// disjoint from it): the moved proxy still gets its new group's config
// within a bound, holding some config at every response, and the waiting
// key's proxy is sent nothing.
func TestAKeyWithoutConfigDoesNotHoldBackAGroupRuleChange(t *testing.T) {
	up := startUpstream(t, "", deadFirstGroups(false))
	rd := startRelay(t, []string{up.d.XDS}, "", daemon.RelayOptions{
		UpstreamAdmin: "http://" + up.d.Admin, UpstreamReadTokenFile: filepath.Join(up.d.DataDir, "read-token"),
		GroupsEvery: 50 * time.Millisecond, UpstreamFor: []string{"dead=127.0.0.1:1"},
	})
	conn := xdstest.Dial(t, rd.xds)
	dead := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "dead-1", Cluster: "dead"})
	dead.Subscribe(xdstype.ClusterURL, "*")
	s := xdstest.OpenDeltaADS(t, conn, &corev3.Node{Id: "mover-1", Cluster: "site-a"})
	s.Subscribe(xdstype.ClusterURL, "*")
	held := map[string]bool{}
	apply := func(within time.Duration) {
		r, err := s.NextWithin(within)
		if err != nil {
			t.Fatalf("mover-1 holds %v, and no response came: %v", slices.Sorted(maps.Keys(held)), err)
		}
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
	apply(bound)
	if got := slices.Sorted(maps.Keys(held)); !slices.Equal(got, []string{"c-edge"}) {
		t.Fatalf("mover-1 holds %v, want edge's c-edge", got)
	}

	writeAtomically(t, up.cfg, deadFirstGroups(true))
	const within = 10 * time.Second
	deadline := time.Now().Add(within)
	for !slices.Equal(slices.Sorted(maps.Keys(held)), []string{"c-mesh"}) {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%v after the rules changed mover-1 holds %v, want mesh's c-mesh: the key without config held the change back", within, slices.Sorted(maps.Keys(held)))
		}
		apply(left)
	}
	if r, err := dead.NextWithin(100 * time.Millisecond); err == nil {
		t.Fatalf("dead-1, whose key has no config, got %v removed %v, want nothing", r.Resources, r.RemovedResources)
	}
}
