package rollout

import (
	"errors"
	"fmt"
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// ErrNoRollout is wrapped by an action on a group with no rollout.
var ErrNoRollout = errors.New("no rollout")

// ErrState is wrapped by an action the rollout's state does not allow
// (promoting a halted rollout, resuming a running one).
var ErrState = errors.New("not allowed in the rollout's state")

// Promote starts the rollout's next stage now, without waiting for the
// bake; promoting the last stage completes it.
func (c *Controller) Promote(group string) (Status, error) {
	return c.act(group, func(r *run, now time.Time) error {
		if r.Halted != "" {
			return fmt.Errorf("group %q: %w: the rollout is halted (%s); resume it first", group, ErrState, r.Halted)
		}
		c.o.Logger.Info("rollout promoted by an operator", "group", group, "from_stage", r.Stage)
		c.enter(r, r.Stage+1, now)
		return nil
	})
}

// Halt stops the rollout and rolls its stage back, as a NACK would.
func (c *Controller) Halt(group string) (Status, error) {
	return c.act(group, func(r *run, now time.Time) error {
		if r.Halted != "" {
			return fmt.Errorf("group %q: %w: the rollout is already halted (%s)", group, ErrState, r.Halted)
		}
		c.halt(r, ReasonOperator, "halted through the admin API", now)
		return nil
	})
}

// Resume restarts a halted rollout at the stage it halted at, its bake
// time counted again.
func (c *Controller) Resume(group string) (Status, error) {
	return c.act(group, func(r *run, now time.Time) error {
		if r.Halted == "" {
			return fmt.Errorf("group %q: %w: the rollout is not halted", group, ErrState)
		}
		stage := max(r.HaltedStage, 1)
		c.o.Logger.Info("rollout resumed by an operator", "group", group, "stage", stage, "was_halted", r.Halted)
		r.Halted, r.HaltedAt, r.HaltedStage, r.Detail, r.Supersede = "", time.Time{}, 0, "", false
		r.nacks = nil // the operator resumed: the count starts again
		c.enter(r, stage, now)
		return nil
	})
}

// Supersede lets the next change of the group replace its halted rollout.
func (c *Controller) Supersede(group string) (Status, error) {
	return c.act(group, func(r *run, _ time.Time) error {
		if r.Halted == "" {
			return fmt.Errorf("group %q: %w: only a halted rollout is superseded (a running one is replaced by any change)", group, ErrState)
		}
		r.Supersede = true
		if c.o.OnSupersede != nil {
			c.o.OnSupersede()
		}
		return nil
	})
}

// SupersedeAll marks every halted rollout not yet superseded superseded,
// and returns their groups: an admin write that says it supersedes them.
// If the write then fails, Unsupersede takes the marks back.
func (c *Controller) SupersedeAll() []string {
	c.mu.Lock()
	defer c.flush() // after the unlock
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.names() {
		if r := c.runs[n]; r.Halted != "" && !r.Supersede {
			r.Supersede = true
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		c.save()
	}
	return out
}

// Unsupersede takes back SupersedeAll's marks on groups, for a write that
// said it supersedes the halted rollouts and was refused: they stay halted.
func (c *Controller) Unsupersede(groups []string) {
	c.mu.Lock()
	defer c.flush() // after the unlock
	defer c.mu.Unlock()
	changed := false
	for _, n := range groups {
		if r := c.runs[n]; r != nil && r.Halted != "" && r.Supersede {
			r.Supersede, changed = false, true
		}
	}
	if changed {
		c.save()
	}
}

// Halted returns the groups whose rollout is halted and not superseded.
func (c *Controller) Halted() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Status
	for _, n := range c.names() {
		if r := c.runs[n]; r.Halted != "" && !r.Supersede {
			out = append(out, r.Status)
		}
	}
	return out
}

// act applies f to the group's rollout, then persists and publishes.
func (c *Controller) act(group string, f func(*run, time.Time) error) (Status, error) {
	c.mu.Lock()
	defer c.flush() // after the unlock
	defer c.mu.Unlock()
	r := c.runs[group]
	if r == nil {
		return Status{}, fmt.Errorf("group %q: %w in progress or halted", group, ErrNoRollout)
	}
	if err := f(r, c.o.Now()); err != nil {
		return r.Status, err
	}
	c.save()
	c.publishLocked()
	c.poke() // the next timer may have moved
	if r := c.runs[group]; r != nil {
		return r.Status, nil
	}
	return Status{Group: group}, nil
}

// Observe takes the xDS stream events: a NACK by a node of the stage halts
// the rollout (applied by Run), and responses of the new version not ACKed
// in time count toward the not_acked condition. It never blocks for long.
func (c *Controller) Observe(e *status.Event) {
	switch e.Kind {
	case status.RequestNACK, status.RequestACK, status.ResponseSent, status.StreamClosed:
	default:
		return
	}
	if c.active.Load() == 0 {
		return
	}
	c.observe(e)
}

// Wants says which per-change events the controller wants now
// (status.Selective): responses and ACKs while a rollout runs, for its
// not_acked condition; none otherwise.
func (c *Controller) Wants(k status.EventKind) bool {
	return (k == status.ResponseSent || k == status.RequestACK) && c.active.Load() != 0
}

// observe is Observe while a rollout runs. Apart, so that the usual case
// (no rollout) does not take its frame on the xDS stream's goroutine,
// whose stack must stay within 8 KB (see internal/xds serveStream).
func (c *Controller) observe(e *status.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Kind == status.StreamClosed {
		for _, r := range c.runs {
			r.late.closed(e.StreamID)
		}
		return
	}
	r := c.runs[e.Group]
	if r == nil || r.Halted != "" || r.haltReq != nil || !r.policy.Takes(r.Stage, memberOf(e)) {
		return
	}
	key := lateKey{stream: e.StreamID, typ: e.TypeURL}
	switch e.Kind {
	case status.RequestNACK:
		if r.policy.Halt.HaltsOnNACK() && c.counts(e) && changed(r, e.TypeURL) {
			c.nacked(r, e)
		}
	case status.ResponseSent:
		if r.policy.Halt.NotACKed != nil && !e.Heartbeat && c.counts(e) && c.introduced(r, e) {
			if r.late.sent(key, e.NodeID(), c.o.Now()) {
				c.o.Logger.Warn("rollout: more responses awaiting an ACK than tracked; the not_acked condition sees part of the stage", "group", r.Group, "tracked", maxLate)
			}
			c.poke()
		}
	case status.RequestACK:
		r.late.acked(key)
	}
}

// changed reports whether the rollout's change touched the type: only a
// NACK of such a type halts it. A proxy that rejects a type the change
// left alone (or an endpoint assignment, which is not rolled out) rejects
// what every node already runs, not the change.
func changed(r *run, typeURL string) bool {
	return typeURL != xdstype.EndpointURL && r.next.Set(typeURL).Version() != r.prev.Set(typeURL).Version()
}

// introduced reports whether a response carried a type version the
// rollout's change introduced.
func (c *Controller) introduced(r *run, e *status.Event) bool {
	v := e.SetVersion
	if v == "" {
		v = e.Version
	}
	next := r.next.Set(e.TypeURL).Version()
	return v == next && next != r.prev.Set(e.TypeURL).Version()
}

// memberOf is the event's node as the stages match it: with its metadata
// and locality (a canary picked by metadata is in its stage).
func memberOf(e *status.Event) nodegroup.Node {
	if e.Member != nil {
		return *e.Member
	}
	// Not a stream's event with a node (the xds server sets Member on
	// every one that has): in no stage by anything but its id.
	return nodegroup.Node{ID: e.NodeID()}
}

// counts reports whether the event's stream may count toward a halt.
// Under an identity rule (Options.Binding) only a stream with a verified
// certificate does: a client without one could claim a node of the stage
// and halt the rollout for the whole group. Without a rule nothing proves
// any node, and every stream counts (Fleet.Exposures warns of it).
func (c *Controller) counts(e *status.Event) bool {
	b := c.o.Binding
	return e.Identity != "" || !b.ID && !b.Cluster
}

// nacked records a NACK of the change by a node of the stage, and asks for
// the halt once halt.min_nodes distinct nodes have NACKed. Nodes are told
// apart by what proves them: the node id where nothing else does or the
// rule binds it, else the certificate, which could claim many ids.
func (c *Controller) nacked(r *run, e *status.Event) {
	node := e.NodeID()
	who := node
	if b := c.o.Binding; b.Cluster && !b.ID {
		who = e.Identity
	}
	if r.nacks == nil {
		r.nacks = map[string]bool{}
	}
	if r.nacks[who] {
		return // a node repeating its NACK is still one node, logged once
	}
	r.nacks[who] = true
	if need := r.policy.Halt.NACKNodes(); len(r.nacks) < need {
		c.o.Logger.Info("rollout: a node of the stage rejected the change; the rollout halts when enough do", "group", r.Group, "node", node, "type", e.TypeURL, "nacked", len(r.nacks), "min_nodes", need)
		return
	}
	// The proxy's error may quote what it refused, keys included: the
	// detail is kept, saved, logged and shown.
	detail := fmt.Sprintf("node %q rejected %s version %s: %s", node, e.TypeURL, e.Version, redact.String(e.Detail))
	if n := len(r.nacks); n > 1 {
		detail = fmt.Sprintf("%d nodes rejected the change; the last, %s", n, detail)
	}
	r.haltReq = &haltReq{reason: ReasonNACK, detail: detail}
	c.poke()
}

// Check refuses f as Publish would, without publishing it: when it changes
// a group whose rollout is halted and not superseded. A store checks a
// compiled write with it before storing it, so that a halt refuses the
// writes to its own group only, and a write refused is not stored.
func (c *Controller) Check(f *fleet.Fleet) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refuseHalted(f)
}
