package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRollout is `pylon rollout status|promote|halt|resume`. Not built yet.
func newRollout(a *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:    "rollout",
		Short:  "Show and drive staged rollouts",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("rollout: not built yet") },
	}
}
