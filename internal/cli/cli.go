// Package cli holds Pylon's command line: serve, bootstrap, validate and
// version.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// Version is Pylon's version, set at build time with
// -ldflags "-X github.com/pylon-xds/pylon/internal/cli.Version=v1.2.3".
var Version = "dev"

// Execute runs the command line with args and returns the exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "pylon:", err)
		return 1
	}
	return 0
}

type globals struct {
	logLevel  string
	logFormat string
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "pylon",
		Short:         "Pylon: an xDS control plane for Envoy fleets and proxyless gRPC",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	admin := &adminFlags{}
	admin.register(root)
	root.AddCommand(newServe(g, admin), newBootstrap(), newValidate(), newVersion(), newStatus(admin), newGet(admin))
	addWriteCommands(root, admin)
	return root
}

func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
}

func sortStrings(s []string) { sort.Strings(s) }

func defaultIdentifier() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("pylon@%s", host)
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Pylon's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), Version)
			return nil
		},
	}
}
