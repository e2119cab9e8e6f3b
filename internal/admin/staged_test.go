package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	rolloutctl "github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// rollingWithFleet is a real controller rolling group "edge" from a cluster
// of 1s timeout to one of 2s (stage 1 of 2, hour-long bakes), the fleet it
// published, and the CDS versions of the previous and the new config.
func rollingWithFleet(t *testing.T) (c *rolloutctl.Controller, pub *fleet.Publisher, prev, next string) {
	t.Helper()
	policy := &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.1, Bake: nodegroup.Duration(time.Hour)}, {Share: 0.5, Bake: nodegroup.Duration(time.Hour)}}}
	pub = fleet.NewPublisher()
	c, err := rolloutctl.New(rolloutctl.Options{Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second} {
		reg := xdstype.New()
		cl := &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(timeout), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
		s, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: cl}})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, s.Set(xdstype.ClusterURL).Version())
		f := fleet.NewGroupedFleet(nodegroup.Groups{{Name: "edge", Default: true, Rollout: policy}}, []*snapshot.Snapshot{s})
		if _, err := c.Publish(f, []config.File{{Path: "c.yaml", Data: []byte(timeout.String())}}); err != nil {
			t.Fatal(err)
		}
	}
	return c, pub, versions[0], versions[1]
}

// GET /rollout/staged: each staged rollout with its stage, the time left
// of its bake, and which nodes run the new version and which the previous
// one, on this replica and the others; the halt's detail is redacted.
func TestStagedRolloutsView(t *testing.T) {
	c, pub, prev, next := rollingWithFleet(t)
	fleet := otherReplicas{remote: []fleetstatus.Remote{
		{Replica: "pylon-b", Proxy: fleetstatus.Proxy{Node: "far", Group: "edge", Kind: "ADS", Types: []fleetstatus.Type{{Type: "CDS", State: status.Synced, ACKed: next}}}},
	}}
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Identifier: "pylon-a", Rollouts: c, Fleet: fleet}, nil)
	h.src.fleet = pub.Current()
	cds := func(acked string) []*status.Type {
		ty := &status.Type{Type: "CDS", State: status.Stale}
		if acked != "" {
			ty.ACKed = &status.Stamp{Version: acked}
		}
		return []*status.Type{ty}
	}
	h.src.streams = []status.Stream{
		{ID: 1, Node: "on-new", Group: "edge", Kind: "ADS", Types: cds(next)},
		{ID: 2, Node: "on-prev", Group: "edge", Kind: "ADS", Types: cds(prev)},
		{ID: 3, Node: "waiting", Group: "edge", Kind: "ADS", Types: cds("")},
		{ID: 4, Node: "elsewhere", Group: "other", Kind: "ADS", Types: cds(prev)},
	}
	if code, _ := h.do(t, "GET", "/rollout/staged", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", code)
	}
	code, body := h.do(t, "GET", "/rollout/staged", readTok, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /rollout/staged: %d %s", code, body)
	}
	var got stagedBody
	decode(t, body, &got)
	if len(got.Rollouts) != 1 || got.Replica != "pylon-a" || !got.Shared {
		t.Fatalf("rollouts: %s", body)
	}
	r := got.Rollouts[0]
	if r.Group != "edge" || r.Stage != 1 || r.Stages != 2 || r.NextInSeconds < 3500 || r.NextInSeconds > 3600 {
		t.Errorf("edge: stage %d/%d, next in %vs; want 1/2, about 3600s", r.Stage, r.Stages, r.NextInSeconds)
	}
	for _, c := range []struct {
		name string
		got  nodeList
		want []string
	}{{"new", r.Nodes.New, []string{"far", "on-new"}}, {"previous", r.Nodes.Previous, []string{"on-prev"}}, {"neither", r.Nodes.Neither, []string{"waiting"}}} {
		if !slices.Equal(c.got.Nodes, c.want) || c.got.Total != len(c.want) {
			t.Errorf("nodes on %s: %v (total %d), want %v", c.name, c.got.Nodes, c.got.Total, c.want)
		}
	}

	// Halted by a NACK quoting a key: the reason and the detail, redacted.
	if _, err := c.Halt("edge"); err != nil {
		t.Fatal(err)
	}
	_, body = h.do(t, "GET", "/rollout/staged", readTok, nil)
	decode(t, body, &got)
	if r := got.Rollouts[0]; r.Halted != rolloutctl.ReasonOperator || r.HaltedStage != 1 || r.NextInSeconds != 0 {
		t.Errorf("halted: %+v", r)
	}
	if strings.Contains(body, "fromFiles") {
		t.Errorf("the view names the state file's saved config: %s", body)
	}
}

// A halt's detail is a proxy's NACK error, which may quote the config it
// refused: the view redacts it.
func TestStagedDetailIsRedacted(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	s := stagedOf(rolloutctl.Status{Group: "edge", Halted: rolloutctl.ReasonNACK, Detail: "node edge-1 refused: " + key}, time.Now(), versionNodes{})
	if strings.Contains(s.Detail, "MIIEvQ") || !strings.HasPrefix(s.Detail, "node edge-1 refused: ") {
		t.Errorf("detail %q", s.Detail)
	}
}

// At most 100 nodes are named per version, and a client cannot pick its id
// to push the others out of the list (ids sorting first, say): nodes with
// a verified client certificate are named first, the others in an order a
// client cannot foresee (a hash keyed by the server), the list shown
// sorted; the total counts them all.
func TestStagedNodesCannotBeCrowdedOutByChosenIds(t *testing.T) {
	c, pub, _, next := rollingWithFleet(t)
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok, Rollouts: c}, nil)
	h.src.fleet = pub.Current()
	add := func(node, identity string) {
		h.src.streams = append(h.src.streams, status.Stream{ID: uint64(len(h.src.streams) + 1), Node: node, Group: "edge", Kind: "ADS", Identity: identity,
			Types: []*status.Type{{Type: "CDS", State: status.Synced, ACKed: &status.Stamp{Version: next}}}})
	}
	const chosen, others, verified = 200, 100, 10
	for i := range chosen {
		add(fmt.Sprintf("!%03d", i), "")
	}
	for i := range others {
		add(fmt.Sprintf("edge-%03d", i), "")
	}
	for i := range verified {
		add(fmt.Sprintf("zz-%d", i), "spiffe://td/ns/edge/sa/envoy")
	}
	code, body := h.do(t, "GET", "/rollout/staged", readTok, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /rollout/staged: %d %s", code, body)
	}
	var got stagedBody
	decode(t, body, &got)
	l := got.Rollouts[0].Nodes.New
	if l.Total != chosen+others+verified || len(l.Nodes) != maxStagedNodes || !slices.IsSorted(l.Nodes) {
		t.Fatalf("new: %d nodes named of %d, sorted %v; want %d of %d, sorted", len(l.Nodes), l.Total, slices.IsSorted(l.Nodes), maxStagedNodes, chosen+others+verified)
	}
	var named [3]int
	for _, n := range l.Nodes {
		switch {
		case strings.HasPrefix(n, "zz-"):
			named[2]++
		case strings.HasPrefix(n, "edge-"):
			named[1]++
		default:
			named[0]++
		}
	}
	// 90 places for 300 unverified nodes: about 30 of the 100 others.
	if named[2] != verified || named[1] < 10 {
		t.Errorf("named %d of the %d verified nodes and %d of the %d others (and %d of the %d chosen ids); want every verified node and about a third of the others", named[2], verified, named[1], others, named[0], chosen)
	}
}
