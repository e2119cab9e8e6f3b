package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/redact"
	filerender "github.com/pylon-xds/pylon/internal/render"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// renderFlags are `pylon render`'s flags.
type renderFlags struct {
	config         string
	out            string
	envoyDir       string
	group          string
	node           config.TestNode
	locality       string
	metadata       []string
	adminPort      uint32
	includeSecrets bool
	watch          bool
	debounce       time.Duration
	debounceMax    time.Duration
	resync         time.Duration
}

func newRender(g *globals) *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:   "render --config FILE|FOLDER --node-id ID --out DIR",
		Short: "Write a node's resources as files for Envoy's path_config_source",
		Long: `Write what Pylon would serve a node as files Envoy reads itself
(path_config_source), for proxies that cannot reach Pylon over gRPC:
lds.yaml and cds.yaml, a file per route configuration, endpoint
assignment and Secret (rds-NAME.yaml, eds-NAME.yaml, sds-NAME.yaml), and a
bootstrap.yaml that points Envoy at them. The ADS config sources of the
resources are rewritten to those files. The config is checked exactly as
pylon validate checks it (route tests included).

Each changed file is written to a temporary file in DIR and renamed over
its name, in make-before-break order; unchanged files are not touched, and
files of resources that are gone are removed last. DIR is created 0700,
files are 0600. Resources holding private keys are refused unless
--include-secrets. With --watch, DIR follows the config until interrupted;
a change that is refused is printed and the previous files stay.
See docs/render.md.`,
		Example: `  pylon render --config ./config/ --node-id edge-1 --out /etc/envoy/xds
  pylon render --config shop.yaml --node-id edge-1 --group edge --out out --envoy-dir /etc/envoy/xds
  pylon render --config ./config/ --node-id edge-1 --out /etc/envoy/xds --watch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options(cmd)
			if err != nil {
				return err
			}
			if !f.watch {
				return renderOnce(cmd.OutOrStdout(), f, o)
			}
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return renderWatch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, o, log)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config file or folder, as pylon validate reads it")
	fl.StringVar(&f.out, "out", "", "the folder to write the files in (created 0700)")
	fl.StringVar(&f.envoyDir, "envoy-dir", "", "the folder as Envoy reads it, for the paths in the files (default: --out, absolute)")
	fl.StringVar(&f.node.ID, "node-id", "", "the node id (the bootstrap's node.id; group rules match on it)")
	fl.StringVar(&f.node.Cluster, "cluster", "", "the node's cluster (node.cluster)")
	fl.StringVar(&f.locality, "locality", "", "the node's locality, region[/zone[/sub_zone]]")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "key=value in the node's metadata, repeatable")
	fl.StringVar(&f.group, "group", "", "the node group to render, instead of the one the group rules give the node")
	fl.Uint32Var(&f.adminPort, "admin-port", 9901, "Envoy's admin port in the bootstrap, bound on 127.0.0.1")
	fl.BoolVar(&f.includeSecrets, "include-secrets", false, "write resources holding private keys too (0600 files; DIR must not be readable by others)")
	fl.BoolVar(&f.watch, "watch", false, "keep DIR current as the config changes, until interrupted")
	fl.DurationVar(&f.debounce, "debounce", 100*time.Millisecond, "with --watch: render once config files have been quiet this long")
	fl.DurationVar(&f.debounceMax, "debounce-max", time.Second, "with --watch: render at most this long after the first change of a burst")
	fl.DurationVar(&f.resync, "resync", 30*time.Second, "with --watch: re-read the config this often even without file events (0: never)")
	return cmd
}

// options checks the flags and returns the render options.
func (f *renderFlags) options(cmd *cobra.Command) (filerender.Options, error) {
	var o filerender.Options
	switch {
	case f.config == "":
		return o, errors.New("--config FILE|FOLDER is required")
	case f.out == "":
		return o, errors.New("--out DIR is required")
	case f.node.ID == "":
		return o, errors.New("--node-id is required: the bootstrap names the node")
	case f.resync < 0:
		return o, fmt.Errorf("--resync %s: want 0 (never) or more", f.resync)
	}
	// The rendered files are YAML: in the config folder they would be read
	// back as config.
	if fi, err := os.Stat(f.config); err == nil && fi.IsDir() && sameDir(f.config, f.out) {
		return o, fmt.Errorf("--out %s is the config folder: the files would be read as config; write them elsewhere", f.out)
	}
	dir := f.envoyDir
	if dir == "" {
		abs, err := filepath.Abs(f.out)
		if err != nil {
			return o, err
		}
		dir = filepath.ToSlash(abs)
	}
	o.EnvoyDir, o.IncludeSecrets = dir, f.includeSecrets
	o.Node = bootstrap.Options{NodeID: f.node.ID, NodeCluster: f.node.Cluster, AdminPort: f.adminPort}
	if cmd.Flags().Changed("locality") {
		l, err := bootstrap.ParseLocality(f.locality)
		if err != nil {
			return o, fmt.Errorf("--locality: %w", err)
		}
		o.Node.Locality = l
		f.node.Region, f.node.Zone, f.node.SubZone = l.Region, l.Zone, l.SubZone
	}
	md, err := bootstrap.ParseMetadata(f.metadata)
	if err != nil {
		return o, fmt.Errorf("--metadata: %w", err)
	}
	o.Node.Metadata, f.node.Metadata = md, md
	return o, nil
}

// sameDir reports whether a and b name one folder.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// renderFiles compiles files as serve would (route tests included),
// picks the node's group and writes its files. Once the config compiles,
// it tells watch (if set) the certificate and key files it read, before
// writing: a rotation seen after the files change is not missed.
func renderFiles(f *renderFlags, o filerender.Options, files []config.File, watch func([]string)) (r rendered, err error) {
	var read []string
	reader := func(p string) ([]byte, error) {
		read = append(read, p)
		return compile.LimitedReader(p)
	}
	fleet, err := compile.Compile(xdstype.New(), files, reader)
	if err != nil {
		return rendered{}, fmt.Errorf("config refused:\n%w", err)
	}
	if watch != nil {
		watch(read)
	}
	node := &f.node
	if f.group != "" {
		node = nil
	}
	g, _, err := compile.GroupOf(fleet, node, f.group)
	if err != nil {
		return rendered{}, err
	}
	out, err := filerender.Render(g.Snapshot, o)
	if err != nil {
		return rendered{}, fmt.Errorf("group %s: %w", g.Name, err)
	}
	res, err := filerender.Write(f.out, out, f.includeSecrets)
	if err != nil {
		return rendered{}, err
	}
	return rendered{group: g.Name, version: g.Snapshot.Version(), Result: res}, nil
}

// rendered is one render's outcome.
type rendered struct {
	group, version string
	filerender.Result
}

func (r rendered) print(w io.Writer, f *renderFlags) {
	fmt.Fprintf(w, "rendered group %s for node %s into %s (version %s)\n", r.group, f.node.ID, f.out, r.version)
	line(w, "written", r.Written)
	line(w, "unchanged", r.Unchanged)
	line(w, "removed", r.Removed)
}

func line(w io.Writer, what string, names []string) {
	if len(names) > 0 {
		fmt.Fprintf(w, "  %-9s %s\n", what, strings.Join(names, " "))
	}
}

func renderOnce(w io.Writer, f *renderFlags, o filerender.Options) error {
	files, err := file.Read(f.config)
	if err != nil {
		return err
	}
	r, err := renderFiles(f, o, files, nil)
	if err != nil {
		return err
	}
	r.print(w, f)
	return nil
}

// renderWatch renders on every change of the config (and of the files it
// names) until ctx ends, with serve's file watcher, debounce and resync.
// A first config that is refused is an error, as for serve; a later
// refused change is printed, redacted, and the files stay.
func renderWatch(ctx context.Context, stdout, stderr io.Writer, f *renderFlags, o filerender.Options, log *slog.Logger) error {
	watcher := file.New(file.Options{Path: f.config, Quiet: f.debounce, MaxWait: f.debounceMax, Resync: f.resync, Logger: log})
	updates := make(chan source.Update)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return watcher.Run(ctx, updates) })
	g.Go(func() error {
		first, lastErr := true, ""
		for {
			var u source.Update
			select {
			case <-ctx.Done():
				return nil
			case u = <-updates:
			}
			r, err := watchStep(f, o, u, watcher.Watch)
			switch {
			case err == nil:
				// A resync that changed nothing says nothing.
				if first || len(r.Written)+len(r.Removed) > 0 {
					r.print(stdout, f)
				}
				lastErr = ""
			case first:
				return err
			case redact.String(err.Error()) != lastErr:
				// A resync repeats a refusal: it is said once. What is
				// printed may quote the config: redacted, as execute
				// does for a command's error.
				lastErr = redact.String(err.Error())
				fmt.Fprintf(stderr, "pylon: render refused, the previous files stay: %s\n", lastErr)
			}
			first = false
		}
	})
	log.Info("rendering on every config change; interrupt to stop", "config", f.config, "out", f.out)
	return g.Wait()
}

func watchStep(f *renderFlags, o filerender.Options, u source.Update, watch func([]string)) (rendered, error) {
	if u.Err != nil {
		return rendered{}, u.Err
	}
	return renderFiles(f, o, u.Files, watch)
}
