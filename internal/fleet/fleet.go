// Package fleet is the stage between compile and the xDS server that
// answers "which snapshot does this node get, and may it have this
// Secret?": a Fleet is every group's snapshot under the group rules, with
// the stages of rollouts in progress and the secret policy, and the
// Publisher hands the newest one to the streams. The content itself is
// snapshot's; the rules and the node are nodegroup's.
package fleet

import (
	"encoding/json"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Group is one node group's share of a fleet.
type Group struct {
	Name     string
	Snapshot *snapshot.Snapshot
	// SuppressDeltaNotFound: see nodegroup.Group.
	SuppressDeltaNotFound bool
	// Unserved: this replica does not serve the group (its --groups
	// leave it to another shard): Snapshot is empty, and the xDS server
	// refuses its nodes.
	Unserved bool
}

// DefaultGroup is the name of the group of a config without groups: every
// node belongs to it.
const DefaultGroup = "default"

// Fleet is everything the xDS server serves at one moment: the group rules
// and each group's snapshot. Streams resolve their node's group against the
// fleet they serve from, so a config change can move a node.
type Fleet struct {
	rules   nodegroup.Groups
	groups  []*Group // aligned with rules
	version string
	// AcceptedAt is when the change that produced this fleet was accepted
	// (the file event or API write), for push-latency figures. Set it
	// before publishing.
	AcceptedAt time.Time
	// secrets restricts Secrets by name to verified identities (see
	// RestrictSecrets).
	secrets map[string][]string
	// staged holds, by rule index, the groups in a staged rollout: their
	// nodes not yet in the rollout's stage get the previous snapshot.
	staged map[int]*staged
}

// staged is one group's rollout as a fleet serves it: both groups are
// built once and shared by every stream.
type staged struct {
	prev   *Group
	stage  int
	policy *nodegroup.Rollout
}

// NewFleet returns a fleet in which every node receives s.
func NewFleet(s *snapshot.Snapshot, acceptedAt time.Time) *Fleet {
	f := NewGroupedFleet(nodegroup.Groups{{Name: DefaultGroup, Default: true}}, []*snapshot.Snapshot{s})
	f.AcceptedAt = acceptedAt
	return f
}

// NewGroupedFleet returns a fleet of groups: snaps[i] is the snapshot of
// rules[i].
func NewGroupedFleet(rules nodegroup.Groups, snaps []*snapshot.Snapshot) *Fleet {
	f := &Fleet{rules: rules}
	var pairs [][2]string
	for i, r := range rules {
		f.groups = append(f.groups, &Group{Name: r.Name, Snapshot: snaps[i], SuppressDeltaNotFound: r.SuppressDeltaNotFound})
		pairs = append(pairs, [2]string{r.Name, snaps[i].Version()})
	}
	// The rules are part of the version: moving a node to another group
	// changes what it receives even when no snapshot changed.
	rulesJSON, _ := json.Marshal(rules)
	pairs = append(pairs, [2]string{"rules", string(rulesJSON)})
	f.version = snapshot.HashPairs(pairs)
	return f
}

// Group returns the group node belongs to, or nil when it matches none.
// identities are what the connection's verified client certificate proves
// (nil without one): groups that declare identities take only those.
func (f *Fleet) Group(node *corev3.Node, identities []string) *Group {
	n := NodeOf(node)
	n.Identities = identities
	return f.GroupOf(n)
}

// GroupOf is Group for a node already in nodegroup's terms (NodeOf,
// with its identities): a stream converts its node once, not on every
// publish.
func (f *Fleet) GroupOf(n nodegroup.Node) *Group {
	if i := f.rules.Resolve(n); i >= 0 {
		if s := f.staged[i]; s != nil && !s.policy.Takes(s.stage, n) {
			return s.prev
		}
		return f.groups[i]
	}
	return nil
}

// Staged returns a copy of f in which the nodes of group that its rollout
// policy does not take at stage (nodegroup.Rollout.Takes) get prev instead of
// the group's snapshot. Both snapshots are shared, not copied. The
// copy's version differs from f's and from any other stage's, so streams
// move between the two snapshots as the stage changes. It returns f when
// the group does not exist or has no rollout policy.
func (f *Fleet) Staged(group string, prev *snapshot.Snapshot, stage int) *Fleet {
	i := f.index(group)
	if i < 0 || f.rules[i].Rollout == nil || prev == nil {
		return f
	}
	c := *f
	c.staged = make(map[int]*staged, len(f.staged)+1)
	for k, v := range f.staged {
		c.staged[k] = v
	}
	g := f.groups[i]
	c.staged[i] = &staged{prev: &Group{Name: g.Name, Snapshot: prev, SuppressDeltaNotFound: g.SuppressDeltaNotFound, Unserved: g.Unserved}, stage: stage, policy: f.rules[i].Rollout}
	c.version = snapshot.HashPairs([][2]string{{"fleet", f.version}, {"staged", group}, {"previous", prev.Version()}, {"stage", strconv.Itoa(stage)}})
	return &c
}

// Previous returns, for a group in a staged rollout, the snapshot the nodes
// outside the stage get and the stage; nil and 0 otherwise.
func (f *Fleet) Previous(group string) (*snapshot.Snapshot, int) {
	if s := f.staged[f.index(group)]; s != nil {
		return s.prev.Snapshot, s.stage
	}
	return nil, 0
}

// Lookup returns the named group and its rule, or nil.
func (f *Fleet) Lookup(group string) (*Group, *nodegroup.Group) {
	if i := f.index(group); i >= 0 {
		return f.groups[i], &f.rules[i]
	}
	return nil, nil
}

func (f *Fleet) index(group string) int {
	for i, g := range f.groups {
		if g.Name == group {
			return i
		}
	}
	return -1
}

// For returns the snapshot a node without a verified identity should run,
// nil when it is in no group.
func (f *Fleet) For(node *corev3.Node) *snapshot.Snapshot {
	if g := f.Group(node, nil); g != nil {
		return g.Snapshot
	}
	return nil
}

// RestrictSecrets sets which verified identities may receive each named
// Secret: glob patterns per secret name (nodegroup.AnyMatch). A Secret not
// named is open to every node of its group whose identity is verified.
// Each group's snapshot carries the policy too (Snapshot.WithSecretPolicy),
// so that one kept past this fleet, the previous snapshot of a staged
// rollout, is still entitled by it. The policy is part of the fleet's
// version, so that a change to it reaches the streams. Call before
// publishing.
func (f *Fleet) RestrictSecrets(policy map[string][]string) {
	if len(policy) == 0 {
		return
	}
	f.secrets = policy
	for _, g := range f.groups {
		g.Snapshot = g.Snapshot.WithSecretPolicy(policy)
	}
	js, _ := json.Marshal(policy) // maps marshal with sorted keys
	f.version = snapshot.HashPairs([][2]string{{"fleet", f.version}, {"secrets", string(js)}})
}

// SecretAllowed reports whether a node with the given verified identities
// may receive the Secret name of snap, served from f: both the policy snap
// was published with and f's own must allow it. A staged rollout serves
// the nodes outside its stage a previous snapshot: a Secret the new config
// deleted or renamed has no entry in f's policy, and stays restricted by
// the one published with it; a policy the new config narrowed applies at
// once, stage or not. Whether a connection without a verified identity
// receives Secrets at all is the server's decision, not the policy's.
func (f *Fleet) SecretAllowed(snap *snapshot.Snapshot, name string, identities []string) bool {
	return allowedBy(snap.SecretPolicy(), name, identities) && allowedBy(f.secrets, name, identities)
}

func allowedBy(policy map[string][]string, name string, identities []string) bool {
	p, restricted := policy[name]
	return !restricted || nodegroup.AnyMatch(p, identities)
}

// SecretPolicy returns the policy set by RestrictSecrets. Do not modify it.
func (f *Fleet) SecretPolicy() map[string][]string { return f.secrets }

// Rules returns the group rules, aligned with Groups. Do not modify them.
func (f *Fleet) Rules() nodegroup.Groups { return f.rules }

// Groups returns the fleet's groups in rule order. Do not modify the slice.
func (f *Fleet) Groups() []*Group { return f.groups }

// Version identifies the fleet's content and rules.
func (f *Fleet) Version() string { return f.version }
