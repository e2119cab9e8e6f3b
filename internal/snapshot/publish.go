package snapshot

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Group is one node group's share of a fleet.
type Group struct {
	Name     string
	Snapshot *Snapshot
	// SuppressDeltaNotFound: see nodegroup.Group.
	SuppressDeltaNotFound bool
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
func NewFleet(s *Snapshot, acceptedAt time.Time) *Fleet {
	f := NewGroupedFleet(nodegroup.Groups{{Name: DefaultGroup, Default: true}}, []*Snapshot{s})
	f.AcceptedAt = acceptedAt
	return f
}

// NewGroupedFleet returns a fleet of groups: snaps[i] is the snapshot of
// rules[i].
func NewGroupedFleet(rules nodegroup.Groups, snaps []*Snapshot) *Fleet {
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
	f.version = hashPairs(pairs)
	return f
}

// Group returns the group node belongs to, or nil when it matches none.
// identities are what the connection's verified client certificate proves
// (nil without one): groups that declare identities take only those.
func (f *Fleet) Group(node *corev3.Node, identities []string) *Group {
	n := ModelNode(node)
	n.Identities = identities
	return f.GroupOf(n)
}

// GroupOf is Group for a node already in the model's terms (ModelNode,
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
func (f *Fleet) Staged(group string, prev *Snapshot, stage int) *Fleet {
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
	c.staged[i] = &staged{prev: &Group{Name: g.Name, Snapshot: prev, SuppressDeltaNotFound: g.SuppressDeltaNotFound}, stage: stage, policy: f.rules[i].Rollout}
	c.version = hashPairs([][2]string{{"fleet", f.version}, {"staged", group}, {"previous", prev.Version()}, {"stage", strconv.Itoa(stage)}})
	return &c
}

// Previous returns, for a group in a staged rollout, the snapshot the nodes
// outside the stage get and the stage; nil and 0 otherwise.
func (f *Fleet) Previous(group string) (*Snapshot, int) {
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
func (f *Fleet) For(node *corev3.Node) *Snapshot {
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
	f.version = hashPairs([][2]string{{"fleet", f.version}, {"secrets", string(js)}})
}

// SecretAllowed reports whether a node with the given verified identities
// may receive the Secret name of snap, served from f: both the policy snap
// was published with and f's own must allow it. A staged rollout serves
// the nodes outside its stage a previous snapshot: a Secret the new config
// deleted or renamed has no entry in f's policy, and stays restricted by
// the one published with it; a policy the new config narrowed applies at
// once, stage or not. Whether a connection without a verified identity
// receives Secrets at all is the server's decision, not the policy's.
func (f *Fleet) SecretAllowed(snap *Snapshot, name string, identities []string) bool {
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

// ModelNode is what group rules and rollout stages match on in n.
func ModelNode(n *corev3.Node) nodegroup.Node {
	out := nodegroup.Node{
		ID:      n.GetId(),
		Cluster: n.GetCluster(),
		Region:  n.GetLocality().GetRegion(),
		Zone:    n.GetLocality().GetZone(),
		SubZone: n.GetLocality().GetSubZone(),
	}
	if fields := n.GetMetadata().GetFields(); len(fields) > 0 {
		out.Metadata = make(map[string]string, len(fields))
		for k, v := range fields {
			if sv := v.GetStringValue(); sv != "" {
				out.Metadata[k] = sv
			}
		}
	}
	return out
}

// Publisher holds the newest Fleet and wakes subscribers when it changes.
//
// Publishing never blocks: the fleet is stored atomically and each
// subscriber's one-slot channel gets a non-blocking send. A subscriber that
// is behind finds the slot full, reads Current when it gets to it and so
// skips every version in between.
type Publisher struct {
	cur  atomic.Pointer[Fleet]
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// fns are the Notify callbacks, one per stream of a fleet: a slice,
	// which a publish walks in order, where a map cost a few cache misses
	// per entry (BenchmarkPublishNotify).
	fns []notified
}

// notified is a Notify callback and where its index in fns is kept, for
// removal (-1 once removed).
type notified struct {
	f  func()
	at *int
}

// NewPublisher returns a publisher with nothing published.
func NewPublisher() *Publisher {
	return &Publisher{subs: map[chan struct{}]struct{}{}}
}

// Current returns the newest fleet, or nil before the first publish.
func (p *Publisher) Current() *Fleet { return p.cur.Load() }

// Publish makes f current and wakes subscribers. It returns false, and
// changes nothing, when f has the same version as the current fleet.
func (p *Publisher) Publish(f *Fleet) bool {
	if old := p.cur.Load(); old != nil && old.Version() == f.Version() {
		return false
	}
	// Current before anyone is woken: a woken stream reads Current and
	// serves what it finds until the next wake-up.
	p.cur.Store(f)
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	for _, n := range p.fns {
		n.f()
	}
	return true
}

// Notify calls f after each publish, and returns a function that stops
// the calls. f runs on the publishing goroutine under the publisher's
// lock: it must return at once and must not publish. Unlike Subscribe it
// needs no goroutine waiting on a channel: what f starts ends when done.
func (p *Publisher) Notify(f func()) func() {
	at := new(int)
	p.mu.Lock()
	*at = len(p.fns)
	p.fns = append(p.fns, notified{f, at})
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		i := *at
		if i < 0 {
			return
		}
		// The last callback takes the removed one's place.
		last := len(p.fns) - 1
		p.fns[i] = p.fns[last]
		*p.fns[i].at = i
		p.fns[last] = notified{}
		p.fns = p.fns[:last]
		*at = -1
	}
}

// Subscribe returns a channel that receives a value after each publish
// (coalesced), and a function that unsubscribes.
func (p *Publisher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}
