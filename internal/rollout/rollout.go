// Package rollout stages a group's config changes across its nodes: the
// new snapshot reaches the nodes of the policy's first stage, the rest keep
// the previous one, and the stages advance once baked, halt on a NACK (or
// on nodes slow to ACK) and roll the stage back.
//
// The controller sits between the pipeline and the publisher: every fleet
// the pipeline builds goes through Publish, which turns it into a staged
// fleet (fleet.Fleet.Staged: both snapshots shared, which one a node
// gets a pure function of its id's hash and the stage). Which stage each
// group is at is the controller's state, changed by bake timers, stream
// events and the admin API, and persisted so that a restart resumes.
package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

// Halt reasons: the bounded values of the halts metric's reason label.
const (
	ReasonNACK     = "nack"
	ReasonNotACKed = "not_acked"
	ReasonOperator = "operator"
)

// Options configures a Controller.
type Options struct {
	// Publisher receives every fleet, staged.
	Publisher *fleet.Publisher
	// StatePath is the file the rollouts are kept in, to resume after a
	// restart; "" keeps them in memory only.
	StatePath string
	// Compile rebuilds a fleet from config files: on start, the previous
	// version of a group in a rollout is compiled again from the files kept
	// in StatePath. Nil: no resume.
	Compile func([]config.File) (*fleet.Fleet, error)
	// Now and After are the clock (default the wall clock).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// OnStage and OnHalt report stage changes (0: halted; -1: the
	// rollout ended) and halts, for metrics.
	OnStage func(group string, stage int)
	OnHalt  func(group, reason string)
	// OnSupersede is called when a halted rollout is superseded: the
	// pipeline applies its last (refused) change again.
	OnSupersede func()
	// Binding is what the identity rule (--node-identity) binds of a
	// node to its verified certificate. Under a rule, only streams with a
	// verified certificate count toward a halt; under one that leaves the
	// node id unbound, halt.min_nodes counts certificates, not the ids
	// one certificate may claim.
	Binding fleet.Binding
	Logger  *slog.Logger
	// Seal, when set, seals the state file (it holds config, private
	// keys included); a sealed one is read only with it.
	Seal *seal.Keyring
}

// Status is one group's rollout, as the admin API shows it.
type Status struct {
	Group string `json:"group"`
	// From and To are the group's config versions (its snapshot's
	// version leaving out endpoints, snapshot.ConfigVersion): the one
	// every node ran before, and the one being rolled out. Endpoints are
	// not rolled out: every node gets the current ones whatever its
	// stage, and a change of endpoints alone starts no rollout.
	From string `json:"from"`
	To   string `json:"to"`
	// Stage is how many of the policy's Stages are in effect: 0 none
	// (halted and rolled back), Stages the last.
	Stage     int       `json:"stage"`
	Stages    int       `json:"stages"`
	EnteredAt time.Time `json:"enteredAt"`
	// NextAt is when the stage has baked and the next starts (zero when
	// halted).
	NextAt time.Time `json:"nextAt,omitzero"`
	// Halted is why the rollout stopped ("" while running), HaltedStage
	// the stage it stopped at, Detail what happened (a NACK's node and
	// error).
	Halted      string    `json:"halted,omitempty"`
	HaltedAt    time.Time `json:"haltedAt,omitzero"`
	HaltedStage int       `json:"haltedStage,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	// Supersede: the next change replaces this halted rollout.
	Supersede bool `json:"supersede,omitempty"`
	// FromFiles names the saved config files of From (in StatePath).
	FromFiles string `json:"fromFiles,omitempty"`
}

// run is a rollout in memory.
type run struct {
	Status
	prev, next *snapshot.Snapshot
	policy     *nodegroup.Rollout
	files      []config.File // the config of prev, to persist
	late       lateness
	// nacks are the nodes of the stage that NACKed the change, until
	// halt.min_nodes of them halt it (at most config.MaxHaltMinNodes).
	nacks   map[string]bool
	haltReq *haltReq // a halt observed on a stream, applied by Run
}

type haltReq struct{ reason, detail string }

// Controller drives the rollouts of every group with a policy.
type Controller struct {
	o    Options
	wake chan struct{}
	// active is how many rollouts there are: the stream events skip the
	// lock when there are none, the usual case.
	active atomic.Int32

	mu    sync.Mutex
	base  *fleet.Fleet  // the newest fleet published, unstaged
	files []config.File // base's config
	runs  map[string]*run
	// saved is the state read from StatePath, for the first Publish.
	saved *state

	// staged is the newest state to write (save), written by flush
	// after mu is released: the xDS events wait on mu (observe), and a
	// write with its fsync must not hold every stream's push up.
	// saveMu orders the writes.
	staged atomic.Pointer[stagedState]
	saveMu sync.Mutex
	// written is the SHA-256 of the state last written, with saveMu.
	written [sha256.Size]byte
	// maxState bounds the state written (maxStateBytes less sealRoom).
	maxState int
	// encoded are the saved configs of the last state encoded, by
	// filesKey, with mu held (encodeState).
	encoded map[string]json.RawMessage
}

// ErrHalted is wrapped by Publish's refusal of a change while a rollout
// is halted.
var ErrHalted = errors.New("rollout halted")

// New returns a controller; it reads the saved state, if any.
func New(o Options) (*Controller, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{o: o, wake: make(chan struct{}, 1), runs: map[string]*run{}, maxState: maxStateBytes - sealRoom}
	st, err := load(o.StatePath, o.Seal)
	if err != nil {
		return nil, err
	}
	c.saved = st
	return c, nil
}

// Publish stages f and publishes it: the pipeline's publish step. files is
// f's config, kept as the previous version of the rollouts the next change
// starts. A change to a group whose rollout is halted is refused (an error
// wrapping ErrHalted) unless Supersede was called for the group; nothing
// is published then.
func (c *Controller) Publish(f *fleet.Fleet, files []config.File) (bool, error) {
	c.mu.Lock()
	defer c.flush() // after the unlock
	defer c.mu.Unlock()
	now := c.o.Now()
	if c.base == nil && c.saved != nil {
		c.resume(f)
		c.saved = nil
	}
	if err := c.refuseHalted(f); err != nil {
		return false, err
	}
	c.start(f, now)
	c.base, c.files = f, files
	c.save()
	c.poke() // Run plans the new stages' timers
	return c.publishLocked(), nil
}

// refuseHalted refuses f when it changes a group whose rollout is halted
// and not superseded.
func (c *Controller) refuseHalted(f *fleet.Fleet) error {
	for _, name := range c.names() {
		r := c.runs[name]
		g, _ := f.Lookup(name)
		if r.Halted == "" || r.Supersede || g == nil || g.Snapshot.ConfigVersion() == r.To || g.Snapshot.ConfigVersion() == r.From {
			continue
		}
		return fmt.Errorf("group %q: %w at stage %d (%s): a new change must supersede it (admin API ?supersede=true, or `pylon rollout supersede %s` then the change), or resume it", name, ErrHalted, r.HaltedStage, r.Halted, name)
	}
	return nil
}

// start begins, replaces or ends each group's rollout for the new fleet f.
func (c *Controller) start(f *fleet.Fleet, now time.Time) {
	for name, r := range c.runs {
		if g, rule := f.Lookup(name); g == nil || rule.Rollout == nil {
			c.o.Logger.Info("rollout ended: the group or its policy is gone", "group", name)
			c.end(name)
		} else if v := g.Snapshot.ConfigVersion(); v == r.From {
			c.o.Logger.Info("rollout ended: the change was reverted", "group", name, "version", v)
			c.end(name)
		}
	}
	if c.base == nil {
		return
	}
	for _, g := range f.Groups() {
		_, rule := f.Lookup(g.Name)
		if rule.Rollout == nil {
			continue
		}
		r := c.runs[g.Name]
		if r != nil && r.To == g.Snapshot.ConfigVersion() {
			// The same change, perhaps under an edited policy or with
			// other endpoints: the stage stays, within the policy's
			// stages.
			r.policy, r.next, r.Stages = rule.Rollout, g.Snapshot, len(rule.Rollout.Stages)
			r.Stage, r.HaltedStage = min(r.Stage, r.Stages), min(r.HaltedStage, r.Stages)
			continue
		}
		prev, files := c.stable(g.Name, r)
		if prev == nil || prev.ConfigVersion() == g.Snapshot.ConfigVersion() {
			continue
		}
		c.runs[g.Name] = &run{
			Status: Status{Group: g.Name, From: prev.ConfigVersion(), To: g.Snapshot.ConfigVersion(), Stages: len(rule.Rollout.Stages)},
			prev:   prev, next: g.Snapshot, policy: rule.Rollout, files: files,
		}
		c.o.Logger.Info("rollout started", "group", g.Name, "from", prev.ConfigVersion(), "to", g.Snapshot.ConfigVersion(), "stages", len(rule.Rollout.Stages))
		c.enter(c.runs[g.Name], 1, now)
	}
}

// stable is the snapshot every node of the group ran before the change,
// and its config: the previous one of the rollout it replaces, else the
// base's.
func (c *Controller) stable(group string, r *run) (*snapshot.Snapshot, []config.File) {
	if r != nil {
		return r.prev, r.files
	}
	if g, _ := c.base.Lookup(group); g != nil {
		return g.Snapshot, c.files
	}
	return nil, nil
}

// enter moves r to stage now; past the last stage the rollout is done.
func (c *Controller) enter(r *run, stage int, now time.Time) {
	if stage > r.Stages {
		c.o.Logger.Info("rollout complete: every node runs the new version", "group", r.Group, "version", r.To)
		c.end(r.Group)
		return
	}
	r.Stage, r.EnteredAt = stage, now
	r.NextAt = now.Add(r.policy.Stages[stage-1].Bake.Std())
	r.late = lateness{}
	c.o.Logger.Info("rollout stage", "group", r.Group, "stage", stage, "of", r.Stages, "bake", r.policy.Stages[stage-1].Bake.Std().String(), "version", r.To)
	c.report(r.Group, stage)
}

func (c *Controller) end(group string) {
	delete(c.runs, group)
	c.report(group, -1)
}

func (c *Controller) report(group string, stage int) {
	if c.o.OnStage != nil {
		c.o.OnStage(group, stage)
	}
}

// halt stops r and rolls its stage back: every node gets the previous
// version until it is resumed or superseded.
func (c *Controller) halt(r *run, reason, detail string, now time.Time) {
	if r.Halted != "" {
		return
	}
	r.Halted, r.HaltedAt, r.HaltedStage, r.Detail = reason, now, r.Stage, detail
	r.Stage, r.NextAt = 0, time.Time{}
	c.o.Logger.Warn("rollout halted: the stage's nodes are rolled back to the previous version", "group", r.Group, "reason", reason, "stage", r.HaltedStage, "detail", detail, "version", r.To)
	c.report(r.Group, 0)
	if c.o.OnHalt != nil {
		c.o.OnHalt(r.Group, reason)
	}
}

// publishLocked publishes the base fleet with every rollout's stage.
func (c *Controller) publishLocked() bool {
	c.active.Store(int32(len(c.runs)))
	if c.base == nil {
		return false
	}
	f := c.base
	for _, name := range c.names() {
		r := c.runs[name]
		// The nodes outside the stage run the previous config with the
		// current endpoints.
		prev := r.prev
		if g, _ := f.Lookup(name); g != nil {
			prev = prev.WithEndpointsOf(g.Snapshot)
		}
		f = f.Staged(name, prev, r.Stage)
	}
	return c.o.Publisher.Publish(f)
}

func (c *Controller) names() []string {
	out := make([]string, 0, len(c.runs))
	for n := range c.runs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Status lists the rollouts in progress or halted, by group.
func (c *Controller) Status() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, 0, len(c.runs))
	for _, n := range c.names() {
		out = append(out, c.runs[n].Status)
	}
	return out
}

// Run advances baked stages and applies halts observed on streams until ctx
// ends.
func (c *Controller) Run(ctx context.Context) error {
	for {
		c.mu.Lock()
		now := c.o.Now()
		if c.step(now) {
			c.save()
			c.publishLocked()
		}
		next := c.nextAt(now)
		c.mu.Unlock()
		c.flush()
		var timer <-chan time.Time
		if !next.IsZero() {
			timer = c.o.After(next.Sub(now))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-timer:
		}
	}
}

// step applies what is due at now; it reports whether anything changed.
func (c *Controller) step(now time.Time) bool {
	changed := false
	for _, name := range c.names() {
		r := c.runs[name]
		if h := r.haltReq; h != nil {
			r.haltReq = nil
			c.halt(r, h.reason, h.detail, now)
			changed = true
			continue
		}
		if r.Halted != "" {
			continue
		}
		if n := r.policy.Halt.NotACKed; n != nil {
			if late, who := r.late.count(now, n.Within.Std()); late > n.Count {
				c.halt(r, ReasonNotACKed, fmt.Sprintf("%d nodes of the stage did not ACK within %v (allowed: %d), e.g. %s", late, n.Within.Std(), n.Count, who), now)
				changed = true
				continue
			}
		}
		if !now.Before(r.NextAt) {
			c.enter(r, r.Stage+1, now)
			changed = true
		}
	}
	return changed
}

// nextAt is the earliest time step has something to do, zero for never.
func (c *Controller) nextAt(now time.Time) time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, r := range c.runs {
		if r.Halted != "" {
			continue
		}
		earlier(r.NextAt)
		if n := r.policy.Halt.NotACKed; n != nil {
			earlier(r.late.due(n.Within.Std()))
		}
	}
	if !next.IsZero() && next.Before(now) {
		next = now
	}
	return next
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
