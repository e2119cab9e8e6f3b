package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func newValidate() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate FILE|FOLDER",
		Short: "Check a config file or folder exactly as `serve` would, without serving it",
		Long: `Check a config file or folder with the same decoding, proto validation,
duplicate and reference checks that serve applies before publishing, and run
its route tests (tests:, see docs/route-tests.md). Prints
the snapshot version and any warnings (a route to a cluster with no
endpoints; the first 50 and how many more) on success, every problem (file:line, type, name, field) on
failure, and exits 1 then. Useful in CI before a config reaches the fleet.
The path is an argument or --config, as serve takes it.`,
		Example: "  pylon validate examples/quickstart.yaml\n  pylon validate --config ./config/",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && path != "" && args[0] != path:
				return fmt.Errorf("two configs given (%s and --config %s): give one", args[0], path)
			case len(args) == 1:
				path = args[0]
			case path == "":
				return fmt.Errorf("no config given: pylon validate FILE|FOLDER (or --config FILE|FOLDER)")
			}
			files, err := file.Read(path)
			if err != nil {
				return err
			}
			fleet, warnings, err := compile.CompileWithWarnings(xdstype.New(), files, compile.LimitedReader)
			if err != nil {
				return fmt.Errorf("config refused:\n%w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "ok: version %s\n", fleet.Version())
			shown, total := pipeline.FirstWarnings(warnings)
			for _, w := range shown {
				fmt.Fprintf(out, "warning: %s\n", w)
			}
			if more := total - len(shown); more > 0 {
				fmt.Fprintf(out, "... and %d more warnings (the first %d are shown)\n", more, len(shown))
			}
			for _, g := range fleet.Groups() {
				n := 0
				for _, s := range g.Snapshot.Sets() {
					n += s.Len()
				}
				fmt.Fprintf(out, "  group %s: %d resources, version %s\n", g.Name, n, g.Snapshot.Version())
			}
			// The compile ran them; a second decode only counts them.
			if doc, err := config.Load(xdstype.New(), files); err == nil && len(doc.Tests) > 0 {
				fmt.Fprintf(out, "  route tests: %d passed\n", len(doc.Tests))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "config file or folder (or give it as the argument)")
	return cmd
}
