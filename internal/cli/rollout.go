package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/ctl"
	"github.com/pylon-xds/pylon/internal/rollout"
)

// newRollout is `pylon rollout status|promote|halt|resume|supersede`.
func newRollout(a *adminFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Show and drive staged rollouts (groups with a rollout: policy)",
		Long: `A group with a rollout: policy gets each change stage by stage: the nodes of
the first stage run the new version, the others the previous one, until the
stage has baked; a NACK by a node of the stage halts the rollout and rolls the
stage back. See docs/rollouts.md.`,
	}
	cmd.AddCommand(newRolloutStatus(a))
	for _, act := range []struct{ name, short, example string }{
		{"promote", "Start the next stage now, without waiting for the bake (the last stage: complete)", "  pylon rollout promote edge"},
		{"halt", "Halt a rollout: every node of the group goes back to the previous version", "  pylon rollout halt edge"},
		{"resume", "Resume a halted rollout at the stage it halted at", "  pylon rollout resume edge"},
		{"supersede", "Let the next change replace a halted rollout (file mode: the refused change is applied again)", "  pylon rollout supersede edge"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use: act.name + " GROUP", Short: act.short, Example: act.example, Args: cobra.ExactArgs(1),
			ValidArgsFunction: ctl.FirstArg(a.GroupNames),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := a.Client()
				var before configState
				if act.name == "supersede" {
					// What was refused before, to tell a refusal of the
					// change applied again from the one it follows.
					if err := c.Get("/status", &before); err != nil {
						return err
					}
				}
				var s rollout.Status
				if err := c.Post("/v1/rollouts/"+url.PathEscape(args[0])+"/"+act.name, &s); err != nil {
					return err
				}
				msg := describe(&s)
				if act.name == "supersede" {
					msg = superseded(cmd.Context(), c, s, before.refusedAt())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "group %s: %s\n", args[0], msg)
				return nil
			},
		})
	}
	return cmd
}

func newRolloutStatus(a *adminFlags) *cobra.Command {
	var o output
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "List the rollouts in progress or halted",
		Example: "  pylon rollout status\n  pylon rollout status -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Check(); err != nil {
				return err
			}
			var body struct {
				Rollouts []rollout.Status `json:"rollouts"`
			}
			if err := a.Client().Get("/v1/rollouts", &body); err != nil {
				return err
			}
			if !o.Table() {
				return render(cmd.OutOrStdout(), o.Format, body)
			}
			return rolloutTable(cmd.OutOrStdout(), body.Rollouts, time.Now())
		},
	}
	o.Register(cmd)
	return cmd
}

func rolloutTable(w io.Writer, rs []rollout.Status, now time.Time) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no rollout in progress")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTAGE\tFROM\tTO\tSTATE")
	for _, r := range rs {
		state := "next stage in " + r.NextAt.Sub(now).Round(time.Second).String()
		stage := fmt.Sprintf("%d/%d", r.Stage, r.Stages)
		if r.Halted != "" {
			state = fmt.Sprintf("HALTED at stage %d (%s): %s", r.HaltedStage, r.Halted, printable(r.Detail))
			if r.Supersede {
				state += "; the next change supersedes it"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(r.Group), stage, r.From, r.To, state)
	}
	return tw.Flush()
}

// describe says what an action left: the stage, halted, or complete.
func describe(s *rollout.Status) string {
	switch {
	case s == nil:
		return "no rollout in progress: every node of the group runs its current config"
	case s.Halted != "" && s.Supersede:
		return fmt.Sprintf("halted (%s) at stage %d; the next change supersedes it", s.Halted, s.HaltedStage)
	case s.Halted != "":
		return fmt.Sprintf("halted (%s) at stage %d", s.Halted, s.HaltedStage)
	case s.Stages == 0:
		return "rollout complete: every node runs the new version"
	}
	return fmt.Sprintf("stage %d of %d", s.Stage, s.Stages)
}

// configState is what GET /status says of the config and the rollouts.
type configState struct {
	Config struct {
		Refused *struct {
			At time.Time `json:"at"`
		} `json:"refused"`
	} `json:"config"`
	Staged []rollout.Status `json:"stagedRollouts"`
}

// refusedAt is when the last change was refused (zero: none is pending).
func (c configState) refusedAt() time.Time {
	if c.Config.Refused == nil {
		return time.Time{}
	}
	return c.Config.Refused.At
}

// supersedeWait bounds how long supersede waits for the refused change
// to be applied again.
const supersedeWait = 5 * time.Second

// superseded says what a supersede left. In file mode the refused change
// is applied again at once, but after the answer: the new rollout is
// awaited (while a refused change is pending, for supersedeWait at most),
// so that what is printed is the state after the call, not the halt it
// found. refusedBefore is when the change pending before the call was
// refused: a later refusal is the change refused again.
func superseded(ctx context.Context, c adminClient, s rollout.Status, refusedBefore time.Time) string {
	if s.Halted == "" || !s.Supersede || refusedBefore.IsZero() {
		return describe(&s)
	}
	ctx, cancel := context.WithTimeout(ctx, supersedeWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var now configState
		if err := c.Get("/status", &now); err != nil {
			return describe(&s)
		}
		i := slices.IndexFunc(now.Staged, func(r rollout.Status) bool { return r.Group == s.Group })
		switch {
		case i < 0:
			return describe(nil)
		case now.Staged[i].Halted == "" || !now.Staged[i].Supersede:
			return describe(&now.Staged[i])
		case now.refusedAt().IsZero():
			return describe(&now.Staged[i])
		case !now.refusedAt().Equal(refusedBefore):
			return describe(&now.Staged[i]) + "; the change applied again was refused (pylon status says why)"
		}
		select {
		case <-ctx.Done():
			return describe(&now.Staged[i]) + "; the refused change is not applied yet (pylon status)"
		case <-tick.C:
		}
	}
}
