// Package ctl is the admin API's client and the commands that only talk
// to it: apply, delete, endpoints, rollback, history and diff (and
// version, which talks to nothing). pylon
// registers them among its own; pylonctl is them alone, a binary that
// links none of the server's packages and so starts in a few milliseconds
// (scripts and CI that apply often). It imports only the standard
// library, cobra, YAML and Pylon's light leaves: TestDependenciesStayLight
// keeps it so.
package ctl

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/redact"
)

// Execute runs pylonctl's command line with args and returns the exit
// code; getenv is the environment (os.Getenv, or a test's).
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	root := &cobra.Command{
		Use:           "pylonctl",
		Short:         "pylonctl: change a running Pylon's config through its admin API (pylon's apply, delete, endpoints, rollback, history and diff, quick to start)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	admin := &Flags{}
	admin.Register(root, getenv)
	AddWriteCommands(root, admin)
	root.AddCommand(NewVersion("pylonctl", "pylonctl", ""))
	if err := root.ExecuteContext(ctx); err != nil {
		// An error may quote the server's refusal of a config: scrubbed
		// of key material, as pylon does.
		fmt.Fprintln(stderr, "pylonctl:", redact.String(err.Error()))
		return 1
	}
	return 0
}
