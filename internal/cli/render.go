package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRender is `pylon render`: a node's resources as files for Envoy's
// path_config_source. Not built yet.
func newRender(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "render",
		Short:  "Write a node's resources as files for Envoy's path_config_source",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("render: not built yet") },
	}
}
