package ctl

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// BuildVersion is what this binary is: the -ldflags override, else the
// main module's version from the build info (a tag, or Go's pseudo-version
// from the VCS), with the VCS commit, its time and whether the tree had
// uncommitted changes.
func BuildVersion(override string, info *debug.BuildInfo, ok bool) (version, detail string) {
	if !ok || info == nil {
		if override != "" {
			return override, ""
		}
		return "unknown", "no build info in this binary"
	}
	version = override
	if version == "" {
		version = info.Main.Version
	}
	if version == "" || version == "(devel)" {
		version = "(devel)"
	}
	s := map[string]string{}
	for _, kv := range info.Settings {
		s[kv.Key] = kv.Value
	}
	var parts []string
	if rev := s["vcs.revision"]; rev != "" {
		c := "commit " + rev
		if s["vcs.time"] != "" {
			c += " (" + s["vcs.time"] + ")"
		}
		if s["vcs.modified"] == "true" {
			c += ", modified"
		}
		parts = append(parts, c)
	} else {
		parts = append(parts, "no VCS commit recorded")
	}
	parts = append(parts, info.GoVersion)
	return version, strings.Join(parts, ", ")
}

// NewVersion is the version command of program (pylon, pylonctl), named
// in its help as name; override is what -ldflags set, "" for the build
// info's version.
func NewVersion(program, name, override string) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print " + name + "'s version and the commit it was built from",
		Example: "  " + program + " version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			v, d := BuildVersion(override, info, ok)
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", program, v)
			if d != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", d)
			}
			return nil
		},
	}
}
