package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func newValidate() *cobra.Command {
	var path string
	var o output
	cmd := &cobra.Command{
		Use:   "validate FILE|FOLDER",
		Short: "Check a config file or folder exactly as `serve` would, without serving it",
		Long: `Check a config file or folder with the same decoding, proto validation,
duplicate and reference checks that serve applies before publishing, and run
its route tests (tests:, see docs/route-tests.md). Prints
the snapshot version and any warnings (a route to a cluster with no
endpoints; the first 50 and how many more) on success, every problem (file:line, type, name, field) on
failure, and exits 1 then. What a group's gRPC clients (clients:) would
reject is listed per client: each resource and field with the rule it
breaks (docs/grpc.md#refusals). Useful in CI before a config reaches the
fleet. The path is an argument or --config, as serve takes it. -o json (or
yaml) prints the same for scripts.`,
		Example: "  pylon validate examples/quickstart.yaml\n  pylon validate --config ./config/ -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Check(); err != nil {
				return err
			}
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
				if o.Table() {
					return refusedError(err)
				}
				return validateRefused(cmd.OutOrStdout(), o.Format, err)
			}
			res := validated(fleet, warnings, files)
			if !o.Table() {
				return render(cmd.OutOrStdout(), o.Format, res)
			}
			writeValidated(cmd.OutOrStdout(), res, len(warnings))
			return nil
		},
	}
	o.Register(cmd)
	cmd.Flags().StringVar(&path, "config", "", "config file or folder (or give it as the argument)")
	return cmd
}

// validated is what validate says of a config that passes.
func validated(f *fleet.Fleet, warnings diag.List, files []config.File) validateResult {
	res := validateResult{OK: true, Version: f.Version()}
	shown, _ := pipeline.FirstWarnings(warnings)
	for _, w := range shown {
		res.Warnings = append(res.Warnings, w.String())
	}
	for _, g := range f.Groups() {
		n := 0
		for _, s := range g.Snapshot.Sets() {
			n += s.Len()
		}
		res.Groups = append(res.Groups, validatedGroup{Name: g.Name, Resources: n, Version: g.Snapshot.Version()})
	}
	// The compile ran them; a second decode only counts them.
	if doc, err := config.Load(xdstype.New(), files); err == nil {
		res.RouteTests = len(doc.Tests)
	}
	return res
}

func writeValidated(out io.Writer, res validateResult, total int) {
	fmt.Fprintf(out, "ok: version %s\n", res.Version)
	for _, w := range res.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if more := total - len(res.Warnings); more > 0 {
		fmt.Fprintf(out, "... and %d more warnings (the first %d are shown)\n", more, len(res.Warnings))
	}
	for _, g := range res.Groups {
		fmt.Fprintf(out, "  group %s: %d resources, version %s\n", g.Name, g.Resources, g.Version)
	}
	if res.RouteTests > 0 {
		fmt.Fprintf(out, "  route tests: %d passed\n", res.RouteTests)
	}
}

// validateRefused prints a refusal for scripts and returns the error that
// makes validate exit 1.
func validateRefused(out io.Writer, format string, err error) error {
	var problems diag.List
	if !errors.As(err, &problems) {
		return fmt.Errorf("config refused:\n%w", err)
	}
	res := validateResult{}
	res.Problems, res.Clients = byClient(problems)
	if rerr := render(out, format, res); rerr != nil {
		return rerr
	}
	return fmt.Errorf("config refused: %s", countOf(len(problems), "problem"))
}
