package config

import (
	"fmt"
	"path"
	"time"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Bounds of a rollout policy: a policy is read on every compile and its
// timers run for days at most.
const (
	MaxRolloutStages = 16
	MaxRolloutBake   = 7 * 24 * time.Hour
	// MaxHaltMinNodes bounds halt.min_nodes: the NACKing nodes a rollout
	// remembers until it halts.
	MaxHaltMinNodes = 10_000
)

// checkRollout checks a group's rollout policy: at least one stage, each a
// share or a selector (not both, not neither), shares growing, bounded bake
// times, and a complete not_acked condition. Each problem names the group
// and the field.
func checkRollout(g Group) diag.List {
	r := g.Rollout
	if r == nil {
		return nil
	}
	var out diag.List
	bad := func(field, format string, args ...any) {
		out = append(out, diag.Diagnostic{File: g.File, Line: g.Line, Type: "group", Name: g.Name, Field: "rollout." + field, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(r.Stages) == 0:
		bad("stages", "a rollout needs at least one stage, e.g. [{share: 10%%, bake: 5m}]")
	case len(r.Stages) > MaxRolloutStages:
		bad("stages", "%d stages, over the limit of %d", len(r.Stages), MaxRolloutStages)
	}
	var last nodegroup.Share
	for i, s := range r.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		switch {
		case s.Selector != nil && s.Share > 0:
			bad(field, "a stage is a share or a selector, not both: write two stages")
		case s.Selector == nil && s.Share <= 0:
			bad(field, "a stage needs a share above 0%% (share: 10%%) or a selector of canary nodes")
		case s.Selector != nil && s.Selector.Matches(nodegroup.Node{}) && len(s.Selector.Metadata) == 0:
			bad(field+".selector", "an empty selector would take every node: name the canaries (id, cluster, metadata or locality)")
		}
		if s.Selector != nil {
			if _, err := path.Match(s.Selector.ID, ""); err != nil {
				bad(field+".selector.id", "bad pattern %q: %v", s.Selector.ID, err)
			}
		}
		if s.Share > 0 {
			if s.Share < last {
				bad(field+".share", "shares must not shrink: %v after %v (a stage keeps the nodes of the stages before it)", percent(s.Share), percent(last))
			}
			last = s.Share
		}
		if b := s.Bake.Std(); b < 0 || b > MaxRolloutBake {
			bad(field+".bake", "bake time %v is out of range (0 to %v)", b, MaxRolloutBake)
		}
	}
	if m := r.Halt.MinNodes; m < 0 || m > MaxHaltMinNodes {
		bad("halt.min_nodes", "must be from 1 to %d (the distinct nodes of the stage whose NACKs halt the rollout)", MaxHaltMinNodes)
	}
	if n := r.Halt.NotACKed; n != nil {
		if n.Count < 0 {
			bad("halt.not_acked.count", "must be 0 or more (the number of nodes allowed to be late)")
		}
		if w := n.Within.Std(); w <= 0 || w > MaxRolloutBake {
			bad("halt.not_acked.within", "must be a duration above 0 and at most %v, such as \"2m\"", MaxRolloutBake)
		}
	}
	return out
}

func percent(s nodegroup.Share) string { return fmt.Sprintf("%g%%", float64(s)*100) }
