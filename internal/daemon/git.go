package daemon

import (
	"errors"
	"log/slog"
	"time"

	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/source/git"
)

// GitOptions is the Git source (--config-git): the config is a folder of
// a Git repository at a branch or tag, polled; see git.Options.
type GitOptions struct {
	// URL is the repository; empty: no Git source.
	URL, Ref, Path  string
	Poll, Timeout   time.Duration
	CredentialsFile string
	KnownHostsFile  string
	// MinGap is the least time between polls the webhook asks for
	// (default git.DefaultMinGap); no flag: tests shorten it.
	MinGap time.Duration
}

// newGit is o's Git source, or nil without one. It refuses a Git source
// with another source of config.
func newGit(o Options, log *slog.Logger) (*git.Source, error) {
	g := o.Git
	if g.URL == "" {
		return nil, nil
	}
	switch {
	case o.ConfigPath != "":
		return nil, errors.New("--config-git and --config are two sources of the config: give one")
	case o.Store == StoreEtcd:
		return nil, errors.New("--config-git reads the config from Git: it does not go with --store etcd")
	}
	return git.New(git.Options{
		URL: g.URL, Ref: g.Ref, Path: g.Path, Poll: g.Poll, Timeout: g.Timeout, CredentialsFile: g.CredentialsFile,
		KnownHostsFile: g.KnownHostsFile, MinGap: g.MinGap,
		Quiet: o.DebounceQuiet, Logger: log,
	})
}

// observeGit counts g's polls in met (pylon_git_*); g may be nil.
func observeGit(g *git.Source, met *metrics.Metrics) {
	if g != nil {
		g.OnPoll(func(p git.Poll) { met.GitPoll(p.Result, p.Commit, p.At) })
	}
}

// paceGit spaces g's updates in a burst by the daemon's spacing, made
// after g (newGit runs with the start's checks); g may be nil.
func paceGit(g *git.Source, spacing func() time.Duration) {
	if g != nil {
		g.SpaceBy(spacing)
	}
}
