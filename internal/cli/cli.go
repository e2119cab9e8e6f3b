// Package cli holds Pylon's command line: serve, bootstrap, validate, the
// admin API's reads (status, get, explain, rollout) and version; the
// writes (apply, delete, endpoints, rollback) and history and diff are
// ctl's, registered here as they are in pylonctl.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/ctl"
	"github.com/pylon-xds/pylon/internal/redact"
)

// Version overrides the build info's module version when set at build
// time with -ldflags "-X github.com/pylon-xds/pylon/internal/cli.Version=v1.2.3".
var Version = ""

// Execute runs the command line with args and returns the exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdout, stderr, os.Getenv)
}

// execute is Execute with the environment passed in (tests give their own).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	root := newRoot(stdout, stderr, getenv)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		// Every command's error may quote a config (a compile error, a
		// refusal): scrubbed of key material in one place.
		fmt.Fprintln(stderr, "pylon:", redact.String(err.Error()))
		return 1
	}
	return 0
}

type globals struct {
	logLevel  string
	logFormat string
}

func newRoot(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "pylon",
		Short:         "Pylon: an xDS control plane for Envoy fleets and proxyless gRPC",
		SilenceUsage:  true,
		SilenceErrors: true,
		// No command sets its own: cobra runs only the nearest one.
		PersistentPreRun: warnAliases,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	admin := &adminFlags{}
	admin.Register(root, getenv)
	root.AddCommand(newServe(g, admin), newBootstrap(), newValidate(), ctl.NewVersion("pylon", "Pylon", Version), newStatus(admin), newGet(admin), newExplain(admin),
		newRender(g), newRollout(admin), newCerts(), newRelay(g, admin))
	ctl.AddWriteCommands(root, admin)
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

func defaultIdentifier() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("pylon@%s", host)
}

// binaryVersion is this binary's version, for the daemon and `version`.
func binaryVersion() (string, string) {
	info, ok := debug.ReadBuildInfo()
	return ctl.BuildVersion(Version, info, ok)
}
