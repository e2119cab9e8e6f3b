package daemon

import (
	"time"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/snapshot"
)

// releases tells the tracker when a staged rollout lets its change reach
// more of its group's nodes (a stage starts, a halted rollout resumes, the
// rollout completes), so that push latency counts from then for those
// nodes, not from the change's acceptance: a stage's bake is the
// rollout's time, not the push's (status.Tracker.Released, release).
//
// It watches the published fleets (fleet.Publisher.Notify): seen is
// touched only by the publisher's callbacks, which the publisher runs for
// one publish at a time, whichever goroutines publish. Registered before the xDS server's callbacks, it runs before
// any stream is woken to send the released version.
type releases struct {
	release func(versions map[string][]string, at time.Time) // status.Tracker.Released
	seen    map[string]staged
}

// staged is what a group's staged rollout was at the last publish.
type staged struct {
	to    string // the group's config version being rolled out
	stage int
	prev  *snapshot.Snapshot // what the nodes outside the stage get
}

func (r *releases) observe(f *fleet.Fleet, at time.Time) {
	if f == nil {
		return
	}
	next := map[string]staged{}
	rules := f.Rules()
	for i, g := range f.Groups() {
		if _, was := r.seen[g.Name]; !was && i < len(rules) && rules[i].Rollout == nil {
			continue // no policy: never staged (and a lookup per group costs a scan)
		}
		prev, stage := f.Previous(g.Name)
		to := g.Snapshot.ConfigVersion()
		if prev != nil {
			next[g.Name] = staged{to: to, stage: stage, prev: prev}
		}
		was, ok := r.seen[g.Name]
		// A new change is timed from its acceptance (Published); the
		// same change reaching more nodes, from now.
		if !ok || was.to != to || (prev != nil && stage <= was.stage) {
			continue
		}
		if prev == nil {
			prev = was.prev // completed: every node gets it now
		}
		if v := heldBack(g.Snapshot, prev); len(v) > 0 {
			r.release(v, at)
		}
	}
	r.seen = next
}

// heldBack is the type versions of next that prev, what the nodes outside
// the stage were given, does not have.
func heldBack(next, prev *snapshot.Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, set := range next.Sets() {
		url := set.Type().URL
		if p := prev.Set(url); p == nil || p.Version() != set.Version() {
			out[url] = append(out[url], set.Version())
		}
	}
	return out
}
