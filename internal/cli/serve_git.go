package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/source/git"
)

// gitFlags are serve's Git source flags but --config-git itself.
var gitFlags = []string{"git-ref", "git-path", "git-poll", "git-timeout", "git-credentials-file", "git-known-hosts"}

// addGitFlags registers the Git source: the config is a folder of a Git
// repository, polled (see docs/sources.md). A Git flag without
// --config-git is refused rather than ignored.
func addGitFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.StringVar(&o.Git.URL, "config-git", "", "serve the config files of a folder of this Git repository (https://, ssh://, http:// or file://), polled for new commits; the admin API is read-only")
	f.StringVar(&o.Git.Ref, "git-ref", git.DefaultRef, "with --config-git: the branch or tag to serve")
	f.StringVar(&o.Git.Path, "git-path", "", "with --config-git: the folder of the repository holding the config files (default: its root)")
	f.DurationVar(&o.Git.Poll, "git-poll", git.DefaultPoll, "with --config-git: how often to check for a new commit (POST /v1/sources/git/poll checks at once)")
	f.DurationVar(&o.Git.Timeout, "git-timeout", git.DefaultTimeout, "with --config-git: how long one check and fetch may take")
	f.StringVar(&o.Git.CredentialsFile, "git-credentials-file", "", "with --config-git: a file only its owner may read holding the credentials: over HTTP user:password or a token (sent as a bearer token), over SSH a private key; never shown")
	f.StringVar(&o.Git.KnownHostsFile, "git-known-hosts", "", "with an ssh:// --config-git (required): the host's keys, in known_hosts format; no other host key is accepted")
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if o.Git.URL == "" {
			for _, name := range gitFlags {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s needs --config-git", name)
				}
			}
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
