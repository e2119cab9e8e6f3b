package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveSections are serve's flags by what they are about, in the order
// --help lists them: every flag serve has is in exactly one (a test
// checks), so a new flag needs a line here.
var serveSections = []flagSection{
	{"xDS", []string{"xds-addr", "xds-rest-addr", "xds-rest-wait", "xds-rest-allowed-host", "hold-timeout", "delta-suppress-not-found"}},
	{"Config", []string{"config", "debounce", "debounce-settle", "debounce-max", "resync", "history-limit"}},
	{"Git", []string{"config-git", "git-ref", "git-path", "git-poll", "git-timeout", "git-credentials-file", "git-known-hosts"}},
	{"Admin API", []string{"admin-addr", "admin-token-file", "read-token-file", "relay-token-file", "admin-tls-cert", "admin-tls-key", "admin-client-ca", "admin-insecure"}},
	{"Kubernetes", []string{"kubeconfig", "kube-in-cluster", "kube-cluster", "kube-merge", "kube-namespaces", "kube-selector", "kube-deny-cidrs", "kube-allow-cidrs", "kube-foreign-slices", "kube-node-localities"}},
	{"Store", []string{"data-dir", "store", "etcd-endpoints", "etcd-prefix", "etcd-cert", "etcd-key", "etcd-ca", "etcd-timeout", "etcd-probe", "encryption-key-file"}},
	{"Security", []string{"xds-tls-cert", "xds-tls-key", "xds-client-ca", "xds-require-client-cert", "node-identity", "trust-domain", "csds-identity", "insecure-serve-secrets", "secret-dir"}},
	{"Limits", []string{"max-initial-sends", "new-streams-per-second", "max-resource-names", "max-streams-per-connection", "send-stall", "xds-rest-max-polls", "admin-max-conns"}},
	{"Replicas and stopping", []string{"id", "max-connection-age", "max-connection-age-grace", "fleet-status-period", "fleet-status-ttl", "balance", "shed-rate", "groups", "drain-period", "shutdown-grace"}},
	{"Logging and help", []string{"log-level", "log-format", "help"}},
	{"Other commands'", []string{"token-file", "admin-ca-file", "admin-cert-file", "admin-key-file"}},
}

// flagSection is a command's flags on one subject, as its help lists
// them.
type flagSection struct {
	title string
	flags []string
}

// usageIn returns a usage function listing a command's flags in sections:
// every flag named must exist (a test checks that every flag is named).
// name is the command's, for the messages.
func usageIn(name string, sections []flagSection) func(*cobra.Command) error {
	return func(cmd *cobra.Command) error {
		var b strings.Builder
		fmt.Fprintf(&b, "Usage:\n  %s [flags]\n", cmd.CommandPath())
		for _, s := range sections {
			fs := pflag.NewFlagSet(s.title, pflag.ContinueOnError)
			for _, flag := range s.flags {
				f := cmd.Flags().Lookup(flag)
				if f == nil {
					f = cmd.InheritedFlags().Lookup(flag)
				}
				if f == nil {
					return fmt.Errorf("%s's help names --%s, which %s does not have", name, flag, name)
				}
				fs.AddFlag(f)
			}
			header := s.title + " flags"
			if s.title == "Other commands'" {
				header = fmt.Sprintf("Flags of the other commands (%s does not read them)", name)
			}
			fmt.Fprintf(&b, "\n%s:\n%s", header, fs.FlagUsages())
		}
		_, err := fmt.Fprint(cmd.OutOrStderr(), b.String())
		return err
	}
}
