package explain

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// rolloutConfig is the group edge, rolled out to its canaries (node ids
// canary-*) first, with a bake no test waits for, and the target hello
// to the service named to.
func rolloutConfig(p []int, to string) string {
	return fmt.Sprintf(`groups:
- name: edge
  default: true
  rollout:
    stages:
    - { selector: { id: "canary-*" }, bake: 1h }
    - { share: 100%%, bake: 1h }
services:
- { name: old, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
- { name: new, protocol: grpc, endpoints: [{ address: 127.0.0.1, port: %d }] }
grpc:
- target: hello
  to: [{ service: %s }]
`, p[0], p[1], to)
}

// TestExplainSaysWhichVersionANodeHoldsInARollout: during a staged
// rollout, explain says whether the node runs the new version or the
// previous one and why (its stage's selector, its share), and explains
// on that version: a canary's calls go to the new service, another
// node's to the old one, as grpc-go's clients show.
func TestExplainSaysWhichVersionANodeHoldsInARollout(t *testing.T) {
	bs := startBackends(t, 2)
	p := startPylon(t, "")
	p.cli(t, "apply", "-f", writeConfig(t, rolloutConfig(bs.ports, "old")))
	canary, other := p.client(t, "canary-1", "hello"), p.client(t, "app-1", "hello")
	warm(t, canary, rpc{method: "UnaryCall"})
	warm(t, other, rpc{method: "UnaryCall"})
	p.cli(t, "apply", "-f", writeConfig(t, rolloutConfig(bs.ports, "new")))
	waitStage(t, p, "edge", 1)
	// The canary's client takes the new version when it reads it: its
	// calls reach the new service from then on.
	deadline := time.Now().Add(bound)
	for bs.counts()[bs.ports[1]] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no call of the canary reached the new service within %v", bound)
		}
		callWithin(canary, rpc{method: "UnaryCall"}, time.Second)
	}

	for _, c := range []struct {
		node, version, why string
		port               int
	}{
		{"canary-1", "new", "it matches the stage's selector", bs.ports[1]},
		{"app-1", "previous", "joins at stage 2", bs.ports[0]},
	} {
		out := p.cli(t, "explain", "--node-id", c.node, "xds:///hello/grpc.testing.TestService/UnaryCall")
		if !strings.Contains(out, "rollout       group \"edge\" at stage 1 of 2: this node runs the "+c.version+" version") || !strings.Contains(out, c.why) {
			t.Errorf("explain of %s during the rollout: want it on the %s version because %q:\n%s", c.node, c.version, c.why, out)
		}
		e := explainRPC(t, p, nil, c.node, "hello", rpc{method: "UnaryCall"})
		if e.Rollout == nil || e.Rollout.Version != c.version {
			t.Errorf("explain -o json of %s: rollout %+v, want version %q", c.node, e.Rollout, c.version)
		}
		want := expect(t, e)
		if want.shares[c.port] != 1 {
			t.Errorf("explain of %s sends its calls to %v, want all to :%d", c.node, want.shares, c.port)
		}
		client := canary
		if c.node != "canary-1" {
			client = other
		}
		check(t, bs, client, rpc{name: c.node + " during the rollout", method: "UnaryCall"}, want, 20)
	}

	// A group named instead of a node: either version, the new one
	// explained.
	out := p.cli(t, "explain", "--group", "edge", "xds:///hello/grpc.testing.TestService/UnaryCall")
	if !strings.Contains(out, `rollout       group "edge" at stage 1 of 2: a node of it runs either version`) || !strings.Contains(out, "give --node-id") {
		t.Errorf("explain of the group during the rollout:\n%s", out)
	}

	// Halted, the stage is rolled back: the canary runs the previous
	// version again, and explain says so and why.
	p.cli(t, "rollout", "halt", "edge")
	waitStage(t, p, "edge", 0)
	out = p.cli(t, "explain", "--node-id", "canary-1", "xds:///hello/grpc.testing.TestService/UnaryCall")
	if !strings.Contains(out, "(halted: ") || !strings.Contains(out, "this node runs the previous version") || !strings.Contains(out, "the rollout is halted at stage 0") {
		t.Errorf("explain of the canary once the rollout halted:\n%s", out)
	}
	e := explainRPC(t, p, nil, "canary-1", "hello", rpc{method: "UnaryCall"})
	deadline = time.Now().Add(bound)
	for bs.counts()[bs.ports[0]] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no call of the canary reached the old service within %v of the halt", bound)
		}
		callWithin(canary, rpc{method: "UnaryCall"}, time.Second)
	}
	check(t, bs, canary, rpc{name: "canary-1 after the halt", method: "UnaryCall"}, expect(t, e), 20)
}

// waitStage waits, within bound, until group's rollout is at stage.
func waitStage(t *testing.T, p *pylon, group string, stage int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		var list struct {
			Rollouts []struct {
				Group string `json:"group"`
				Stage int    `json:"stage"`
			} `json:"rollouts"`
		}
		if err := json.Unmarshal([]byte(p.cli(t, "rollout", "status", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Rollouts {
			if r.Group == group && r.Stage == stage {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollout of %s did not reach stage %d within %v", group, stage, bound)
		}
		time.Sleep(50 * time.Millisecond) // polling the daemon's rollout controller
	}
}
