package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// stageNodesN returns n node ids the first stage of policy takes.
func stageNodesN(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < 10000 && len(out) < n; i++ {
		if id := fmt.Sprintf("edge-%d", i); policy.Takes(1, nodegroup.Node{ID: id}) {
			out = append(out, id)
		}
	}
	if len(out) < n {
		t.Fatalf("found %d of %d stage nodes", len(out), n)
	}
	return out
}

// running is a controller that rolled out v2 over v1 and is at stage 1.
func running(t *testing.T, o Options, p *nodegroup.Rollout) *Controller {
	t.Helper()
	clk := newClock()
	o.Publisher, o.Now, o.After = fleet.NewPublisher(), clk.Now, clk.After
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(policyFleet(t, time.Second, p), files("1"))
	start(t, c)
	c.Publish(policyFleet(t, 2*time.Second, p), files("2"))
	return c
}

func haltedFor(t *testing.T, c *Controller) string {
	t.Helper()
	waitFor(t, "the halt", func() bool { s := c.Status(); return len(s) == 1 && s[0].Halted == ReasonNACK })
	return c.Status()[0].Detail
}

// Finding 3 of issue 30: under an identity rule (--node-identity), a
// client without a verified certificate can claim any node id, one of the
// first stage's too; its NACK must not halt the group's rollout. The
// verified node's NACK that follows does, and the halt names it.
func TestUnverifiedClientCannotHaltUnderIdentityRule(t *testing.T) {
	c := running(t, Options{Binding: fleet.Binding{ID: true, Cluster: true}}, policy)
	in := stageNodesN(t, 2)
	c.Observe(new(nack(in[0]))) // no certificate: Identity ""
	verified := nack(in[1])
	verified.Identity = "spiffe://example.org/ns/edge/sa/" + in[1]
	c.Observe(&verified)
	if d := haltedFor(t, c); !strings.Contains(d, in[1]) || strings.Contains(d, in[0]) {
		t.Fatalf("halted for %q: want the verified node %s's NACK, not the unverified claim of %s", d, in[1], in[0])
	}
}

// Without an identity rule nothing proves a node id, and every stream's
// NACK counts (Fleet.Exposures warns of it at publish).
func TestNACKCountsWithoutIdentityRule(t *testing.T) {
	c := running(t, Options{}, policy)
	in := stageNodesN(t, 1)
	c.Observe(new(nack(in[0])))
	if d := haltedFor(t, c); !strings.Contains(d, in[0]) {
		t.Fatalf("halted for %q", d)
	}
}

// halt.min_nodes: the rollout halts once that many distinct nodes of the
// stage NACKed the change; one node NACKing again is still one.
func TestHaltMinNodes(t *testing.T) {
	p := &nodegroup.Rollout{Stages: policy.Stages, Halt: nodegroup.Halt{MinNodes: 2}}
	c := running(t, Options{}, p)
	in := stageNodesN(t, 2)
	c.Observe(new(nack(in[0])))
	c.Observe(new(nack(in[0])))
	if s := c.Status(); s[0].Halted != "" || c.runs["edge"].haltReq != nil {
		t.Fatalf("halted on one node's NACKs with min_nodes 2: %+v", s[0])
	}
	c.Observe(new(nack(in[1])))
	if d := haltedFor(t, c); !strings.Contains(d, "2 nodes rejected the change") || !strings.Contains(d, in[1]) {
		t.Fatalf("halted for %q: want both nodes counted, the last named", d)
	}
}

// Finding 6 of issue 30: a stage's canary picked by metadata is in the
// stage: the controller matches the node the stream reports as group rules
// do (Event.Member), not the few fields it logs.
func TestMetadataCanaryIsInTheStage(t *testing.T) {
	p := &nodegroup.Rollout{Stages: []nodegroup.Stage{{Selector: &nodegroup.Match{Metadata: map[string]string{"canary": "true"}}}, {Share: 1}}}
	c := running(t, Options{}, p)
	e := nack("canary-outside-any-share")
	e.Member = &nodegroup.Node{ID: e.NodeID(), Metadata: map[string]string{"canary": "true"}}
	c.Observe(&e)
	if d := haltedFor(t, c); !strings.Contains(d, "canary-outside-any-share") {
		t.Fatalf("halted for %q", d)
	}
}

// Finding 3 of issue 30: a halted rollout refuses changes to its own
// group only: a change to another group is published.
func TestHaltInOneGroupDoesNotBlockAnother(t *testing.T) {
	clk, pub := newClock(), fleet.NewPublisher()
	c, err := New(Options{Publisher: pub, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	two := func(edge, mesh time.Duration) *fleet.Fleet {
		rules := nodegroup.Groups{{Name: "edge", Match: nodegroup.Match{ID: "edge-*"}, Rollout: policy}, {Name: "mesh", Default: true, Rollout: policy}}
		return fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{clusterSnap(t, edge), clusterSnap(t, mesh)})
	}
	c.Publish(two(time.Second, time.Second), files("1"))
	start(t, c)
	if _, err := c.Publish(two(2*time.Second, time.Second), files("2")); err != nil {
		t.Fatal(err)
	}
	c.Observe(new(nack(stageNodesN(t, 1)[0])))
	haltedFor(t, c)
	// A store checks a write before storing it, as Publish decides.
	if err := c.Check(two(3*time.Second, time.Second)); !errors.Is(err, ErrHalted) {
		t.Fatalf("Check of a change to the halted edge: %v, want ErrHalted", err)
	}
	if err := c.Check(two(2*time.Second, 3*time.Second)); err != nil {
		t.Fatalf("Check of a change to mesh alone while edge is halted: %v", err)
	}
	if _, err := c.Publish(two(2*time.Second, 3*time.Second), files("3")); err != nil {
		t.Fatalf("a change to mesh alone while edge is halted: %v", err)
	}
	if g := pub.Current().Group(&corev3.Node{Id: "mesh-1"}, nil); g.Name != "mesh" {
		t.Fatalf("mesh-1 is in %s", g.Name)
	}
}

func clusterSnap(t *testing.T, timeout time.Duration) *snapshot.Snapshot {
	t.Helper()
	reg := xdstype.New()
	c := &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(timeout), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	s, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: c}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Under a rule that binds the cluster but not the node id, one certificate
// may claim any id of its cluster: halt.min_nodes counts certificates.
func TestHaltMinNodesCountsCertificatesWhenIDsAreUnbound(t *testing.T) {
	p := &nodegroup.Rollout{Stages: policy.Stages, Halt: nodegroup.Halt{MinNodes: 2}}
	c := running(t, Options{Binding: fleet.Binding{Cluster: true}}, p)
	in := stageNodesN(t, 3)
	for _, id := range in[:2] {
		e := nack(id)
		e.Identity = "spiffe://example.org/ns/edge/sa/one"
		c.Observe(&e)
	}
	if s := c.Status(); s[0].Halted != "" || c.runs["edge"].haltReq != nil {
		t.Fatalf("one certificate claiming two node ids halted a min_nodes 2 rollout: %+v", s[0])
	}
	other := nack(in[2])
	other.Identity = "spiffe://example.org/ns/edge/sa/two"
	c.Observe(&other)
	if d := haltedFor(t, c); !strings.Contains(d, "2 nodes rejected the change") {
		t.Fatalf("halted for %q", d)
	}
}
