package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// aliasOf is the annotation naming the flag an old spelling stands for.
const aliasOf = "pylon-alias-of"

// alias adds old as a hidden spelling of the flag now, sharing its value:
// scripts written for the old spelling keep working, and warnAliases says
// what to write instead.
func alias(fs *pflag.FlagSet, old, now string) {
	f := fs.Lookup(now)
	fs.AddFlag(&pflag.Flag{
		Name: old, Usage: "deprecated: use --" + now, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal,
		Hidden: true, Annotations: map[string][]string{aliasOf: {now}},
	})
}

// warnAliases prints one line per old spelling used (a root's
// PersistentPreRun: after parsing, before the command runs).
func warnAliases(cmd *cobra.Command, _ []string) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if now := f.Annotations[aliasOf]; len(now) == 1 {
			fmt.Fprintf(cmd.ErrOrStderr(), "pylon: --%s is deprecated: use --%s\n", f.Name, now[0])
		}
	})
}
