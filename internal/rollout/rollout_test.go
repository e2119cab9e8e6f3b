package rollout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a manual clock: After's channels fire when Advance passes them.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	ch chan time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, timer{at: c.now.Add(d), ch: ch})
	return ch
}

// waitTimer waits until a timer is pending: Run has planned its next step.
func (c *clock) waitTimer(t *testing.T) {
	waitFor(t, "a timer", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.timers) > 0
	})
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	c.timers = kept
}

var policy = &nodegroup.Rollout{
	Stages: []nodegroup.Stage{{Share: 0.1, Bake: nodegroup.Duration(time.Minute)}, {Share: 0.5, Bake: nodegroup.Duration(time.Minute)}},
}

// policyFleet is a one-group fleet whose cluster "a" has the given timeout: a
// distinct snapshot per timeout.
func policyFleet(t *testing.T, timeout time.Duration, p *nodegroup.Rollout) *fleet.Fleet {
	t.Helper()
	reg := xdstype.New()
	c := &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(timeout), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	// The assignment changes with the clusters, so that a NACK of it is
	// of a type the change touched: only the rule that assignments never
	// halt a rollout keeps it from halting (TestNACKHaltsAndRollsBack).
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: "b", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8000 + uint32(timeout/time.Second)}}}}}},
	}}}}}
	s, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "a", Message: c}, {Type: reg.Lookup(xdstype.EndpointURL), Name: "b", Message: cla}})
	if err != nil {
		t.Fatal(err)
	}
	return fleet.NewGroupedFleet(nodegroup.Groups{{Name: "edge", Default: true, Rollout: p}}, []*snapshot.Snapshot{s})
}

func files(v string) []config.File { return []config.File{{Path: "c.yaml", Data: []byte(v)}} }

// onNew counts the nodes of 1000 on the group's newest snapshot.
func onNew(pub *fleet.Publisher, want *snapshot.Snapshot) int {
	n := 0
	for i := range 1000 {
		if pub.Current().Group(&corev3.Node{Id: fmt.Sprintf("edge-%d", i)}, nil).Snapshot.Version() == want.Version() {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func start(t *testing.T, c *Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A change advances stage by stage as each bake ends, then completes: the
// nodes on the new snapshot grow 0 -> ~10% -> ~50% -> all.
func TestStagesAdvanceWithBake(t *testing.T) {
	clk, pub := newClock(), fleet.NewPublisher()
	c, err := New(Options{Publisher: pub, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	if _, err := c.Publish(v1, files("1")); err != nil {
		t.Fatal(err)
	}
	if len(c.Status()) != 0 || onNew(pub, v1.Groups()[0].Snapshot) != 1000 {
		t.Fatal("the first config is rolled out: nothing ran before it")
	}
	start(t, c)
	if _, err := c.Publish(v2, files("2")); err != nil {
		t.Fatal(err)
	}
	next := v2.Groups()[0].Snapshot
	if n := onNew(pub, next); n < 70 || n > 130 {
		t.Fatalf("stage 1: %d of 1000 nodes on the new version, want about 100", n)
	}
	clk.waitTimer(t)
	clk.Advance(59 * time.Second)
	if s := c.Status(); s[0].Stage != 1 {
		t.Fatalf("stage advanced before its bake: %+v", s)
	}
	clk.Advance(time.Second)
	waitFor(t, "stage 2", func() bool { s := c.Status(); return len(s) == 1 && s[0].Stage == 2 })
	if n := onNew(pub, next); n < 430 || n > 570 {
		t.Fatalf("stage 2: %d of 1000 nodes on the new version, want about 500", n)
	}
	clk.waitTimer(t)
	clk.Advance(time.Minute)
	waitFor(t, "completion", func() bool { return len(c.Status()) == 0 })
	if n := onNew(pub, next); n != 1000 {
		t.Fatalf("complete: %d of 1000 on the new version", n)
	}
}

func nack(node string) status.Event { return nackOf(node, xdstype.ClusterURL) }

func nackOf(node, typeURL string) status.Event {
	return status.Event{Kind: status.RequestNACK, Group: "edge", Node: &corev3.Node{Id: node}, Member: &nodegroup.Node{ID: node}, TypeURL: typeURL, Version: "x", Detail: "bad"}
}

// stageNode is a node of 1000 the first stage takes, and one it does not.
func stageNodes() (in, out string) {
	for i := range 1000 {
		id := fmt.Sprintf("edge-%d", i)
		if policy.Takes(1, nodegroup.Node{ID: id}) {
			in = id
		} else {
			out = id
		}
	}
	return in, out
}

// A NACK by a node of the stage halts the rollout and rolls the stage
// back; one by a node outside it does not. A change while halted is
// refused unless superseded.
func TestNACKHaltsAndRollsBack(t *testing.T) {
	clk, pub := newClock(), fleet.NewPublisher()
	var halts []string
	c, err := New(Options{Publisher: pub, Now: clk.Now, After: clk.After, OnHalt: func(g, r string) { halts = append(halts, g+"/"+r) }})
	if err != nil {
		t.Fatal(err)
	}
	v1, v2, v3 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy), policyFleet(t, 3*time.Second, policy)
	c.Publish(v1, files("1"))
	start(t, c)
	c.Publish(v2, files("2"))
	in, out := stageNodes()
	// Neither a NACK by a node outside the stage nor one of a type the
	// change left alone (the Runtime, assignments) halts: the halt that
	// comes names the stage node's NACK of the clusters.
	c.Observe(new(nack(out)))
	c.Observe(new(nackOf(in, xdstype.RuntimeURL)))
	c.Observe(new(nackOf(in, xdstype.EndpointURL)))
	c.Observe(new(nack(in)))
	waitFor(t, "the halt", func() bool { s := c.Status(); return len(s) == 1 && s[0].Halted == ReasonNACK })
	if d := c.Status()[0].Detail; !strings.Contains(d, fmt.Sprintf("node %q rejected %s", in, xdstype.ClusterURL)) {
		t.Fatalf("halted for %q: want the stage node's NACK of the clusters", d)
	}
	if n := onNew(pub, v2.Groups()[0].Snapshot); n != 0 {
		t.Fatalf("halted: %d nodes still on the new version", n)
	}
	if s := c.Status()[0]; s.HaltedStage != 1 || s.Stage != 0 || fmt.Sprint(halts) != "[edge/nack]" {
		t.Fatalf("status %+v, halts %v", s, halts)
	}
	clk.Advance(time.Hour)
	if s := c.Status()[0]; s.Stage != 0 {
		t.Fatal("a halted rollout advanced")
	}
	if _, err := c.Publish(v3, files("3")); !errors.Is(err, ErrHalted) {
		t.Fatalf("a change while halted: %v, want ErrHalted", err)
	}
	if _, err := c.Supersede("edge"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(v3, files("3")); err != nil {
		t.Fatal(err)
	}
	if s := c.Status()[0]; s.From != v1.Groups()[0].Snapshot.ConfigVersion() || s.To != v3.Groups()[0].Snapshot.ConfigVersion() || s.Stage != 1 {
		t.Fatalf("the superseding rollout: %+v", s)
	}
}

// Operators promote, halt and resume.
func TestOperatorActions(t *testing.T) {
	clk, pub := newClock(), fleet.NewPublisher()
	c, _ := New(Options{Publisher: pub, Now: clk.Now, After: clk.After})
	v1, v2 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	c.Publish(v1, files("1"))
	if _, err := c.Promote("edge"); !errors.Is(err, ErrNoRollout) {
		t.Fatalf("promote without a rollout: %v", err)
	}
	c.Publish(v2, files("2"))
	if s, err := c.Promote("edge"); err != nil || s.Stage != 2 {
		t.Fatalf("promote: %+v, %v", s, err)
	}
	if s, err := c.Halt("edge"); err != nil || s.Halted != ReasonOperator || s.HaltedStage != 2 {
		t.Fatalf("halt: %+v, %v", s, err)
	}
	if _, err := c.Promote("edge"); !errors.Is(err, ErrState) {
		t.Fatalf("promote while halted: %v", err)
	}
	if s, err := c.Resume("edge"); err != nil || s.Stage != 2 || s.Halted != "" {
		t.Fatalf("resume: %+v, %v", s, err)
	}
	if n := onNew(pub, v2.Groups()[0].Snapshot); n < 430 {
		t.Fatalf("resumed at stage 2: %d nodes on the new version", n)
	}
	c.Promote("edge")
	if len(c.Status()) != 0 || onNew(pub, v2.Groups()[0].Snapshot) != 1000 {
		t.Fatal("promoting the last stage did not complete the rollout")
	}
}

// A restart resumes the rollout at its stage, halted or not, with the
// previous version compiled again from the saved config.
func TestRestartResumes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rollouts.json")
	byFile := map[string]*fleet.Fleet{}
	compile := func(fs []config.File) (*fleet.Fleet, error) { return byFile[string(fs[0].Data)], nil }
	v1, v2 := policyFleet(t, time.Second, policy), policyFleet(t, 2*time.Second, policy)
	byFile["1"], byFile["2"] = v1, v2
	clk := newClock()
	c, _ := New(Options{Publisher: fleet.NewPublisher(), StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	c.Publish(v1, files("1"))
	c.Publish(v2, files("2"))
	c.Promote("edge")
	before := c.Status()[0]

	// A new process: the same config (v2) is its first fleet.
	pub := fleet.NewPublisher()
	c2, err := New(Options{Publisher: pub, StatePath: path, Compile: compile, Now: clk.Now, After: clk.After})
	if err != nil {
		t.Fatal(err)
	}
	c2.Publish(policyFleet(t, 2*time.Second, policy), files("2"))
	s := c2.Status()
	if len(s) != 1 || s[0].Stage != 2 || s[0].From != before.From || !s[0].EnteredAt.Equal(before.EnteredAt) {
		t.Fatalf("after a restart: %+v, before %+v", s, before)
	}
	if n := onNew(pub, v2.Groups()[0].Snapshot); n < 430 || n > 570 {
		t.Fatalf("resumed at stage 2: %d nodes on the new version", n)
	}
}

// A node of the stage that does not ACK the new version within the bound
// counts toward not_acked; one that ACKs in time does not. More late nodes
// than allowed halt the rollout.
func TestNotACKedHalts(t *testing.T) {
	slow := &nodegroup.Rollout{
		Stages: []nodegroup.Stage{{Share: 0.1, Bake: nodegroup.Duration(time.Hour)}},
		Halt:   nodegroup.Halt{NotACKed: &nodegroup.NotACKed{Count: 0, Within: nodegroup.Duration(time.Minute)}},
	}
	clk, pub := newClock(), fleet.NewPublisher()
	c, _ := New(Options{Publisher: pub, Now: clk.Now, After: clk.After})
	v1, v2 := policyFleet(t, time.Second, slow), policyFleet(t, 2*time.Second, slow)
	c.Publish(v1, files("1"))
	start(t, c)
	// Responses and ACKs are wanted while a rollout runs, not before
	// (status.Selective): the xds server reports them only then.
	if c.Wants(status.ResponseSent) || c.Wants(status.RequestACK) {
		t.Fatal("responses or ACKs wanted with no rollout running")
	}
	c.Publish(v2, files("2"))
	if !c.Wants(status.ResponseSent) || !c.Wants(status.RequestACK) || c.Wants(status.ExpectedVersion) {
		t.Fatal("a running rollout wants responses and ACKs, and nothing else of the per-change events")
	}
	in, _ := stageNodes()
	set := v2.Groups()[0].Snapshot.Set(xdstype.ClusterURL).Version()
	sent := func(stream uint64) status.Event {
		return status.Event{Kind: status.ResponseSent, StreamID: stream, Group: "edge", Node: &corev3.Node{Id: in}, Member: &nodegroup.Node{ID: in}, TypeURL: xdstype.ClusterURL, Version: set, SetVersion: set}
	}
	// Stream 1 ACKs in time; stream 2 never does.
	c.Observe(new(sent(1)))
	ack := sent(1)
	ack.Kind = status.RequestACK
	c.Observe(&ack)
	clk.waitTimer(t)
	clk.Advance(2 * time.Minute)
	if s := c.Status()[0]; s.Halted != "" {
		t.Fatalf("halted though the node ACKed: %+v", s)
	}
	c.Observe(new(sent(2)))
	waitFor(t, "the late-ACK timer", func() bool {
		clk.mu.Lock()
		defer clk.mu.Unlock()
		for _, tm := range clk.timers {
			if tm.at.Equal(clk.now.Add(time.Minute)) {
				return true
			}
		}
		return false
	})
	clk.Advance(59 * time.Second)
	if s := c.Status()[0]; s.Halted != "" {
		t.Fatalf("halted before the bound: %+v", s)
	}
	clk.Advance(time.Second)
	waitFor(t, "the not_acked halt", func() bool { return c.Status()[0].Halted == ReasonNotACKed })
	if s := c.Status()[0]; !strings.Contains(s.Detail, in) {
		t.Fatalf("the halt does not name the late node: %+v", s)
	}
}
