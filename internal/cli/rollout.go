package cli

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
			RunE: func(cmd *cobra.Command, args []string) error {
				res, err := a.client().do("POST", "/v1/rollouts/"+url.PathEscape(args[0])+"/"+act.name, nil, "")
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "group %s: %s\n", args[0], describe(res))
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
			if err := o.check(); err != nil {
				return err
			}
			var body struct {
				Rollouts []rollout.Status `json:"rollouts"`
			}
			if err := a.client().get("/v1/rollouts", &body); err != nil {
				return err
			}
			if !o.table() {
				return render(cmd.OutOrStdout(), o.format, body)
			}
			return rolloutTable(cmd.OutOrStdout(), body.Rollouts, time.Now())
		},
	}
	o.register(cmd)
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
func describe(res map[string]any) string {
	stage, _ := res["stage"].(float64)
	stages, _ := res["stages"].(float64)
	switch halted, _ := res["halted"].(string); {
	case halted != "":
		return fmt.Sprintf("halted (%s) at stage %v", halted, res["haltedStage"])
	case stages == 0:
		return "rollout complete: every node runs the new version"
	}
	return fmt.Sprintf("stage %d of %d", int(stage), int(stages))
}
