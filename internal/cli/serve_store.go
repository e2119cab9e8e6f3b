package cli

import (
	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/store/etcd"
)

// addStoreFlags registers where serve keeps its config: the embedded bolt
// store (default) or etcd, shared by several replicas. The daemon checks
// the combination (etcd without endpoints, half a key pair, etcd flags
// without --store etcd) before it opens anything.
func addStoreFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.StringVar(&o.Store, "store", daemon.StoreBolt, "where the config is kept without --config: bolt (embedded, in --data-dir) or etcd (shared by several replicas)")
	f.StringSliceVar(&o.Etcd.Endpoints, "etcd-endpoints", nil, "etcd members, host:port or URLs, comma separated (required with --store etcd)")
	f.StringVar(&o.Etcd.Prefix, "etcd-prefix", etcd.DefaultPrefix, "etcd key prefix of this fleet's config; fleets sharing one etcd use different prefixes")
	f.StringVar(&o.Etcd.Cert, "etcd-cert", "", "client certificate (PEM) this replica presents to etcd; with --etcd-key")
	f.StringVar(&o.Etcd.Key, "etcd-key", "", "the etcd client certificate's private key (PEM); never readable as a secret file")
	f.StringVar(&o.Etcd.CA, "etcd-ca", "", "CA certificates (PEM) verifying etcd's servers; any --etcd-cert/--etcd-key/--etcd-ca turns TLS to etcd on")
	f.DurationVar(&o.Etcd.Timeout, "etcd-timeout", 0, "with --store etcd: how long one etcd call may take before the write is refused (503) and etcd counted unreachable (0: the default, 5s)")
	f.DurationVar(&o.Etcd.Probe, "etcd-probe", 0, "with --store etcd: how often etcd is checked while idle, and retried while unreachable (0: the default, 1s)")
	f.StringVar(&o.EncryptionKeyFile, "encryption-key-file", "", "seal what is kept at rest (stored objects and their history, bbolt or etcd, and the rollout state) with AES-256-GCM under the keys of this file, one name:base64-32-bytes a line: the first seals, all open (see docs/security.md)")
	f.DurationVar(&o.FleetStatusPeriod, "fleet-status-period", 0, "with --store etcd: how often this replica publishes its proxies' summary for the fleet-wide status (0: the default, 5s)")
	f.DurationVar(&o.FleetStatusTTL, "fleet-status-ttl", 0, "with --store etcd: how long a stopped replica's proxies stay listed when it could not remove them itself (0: the default, 3 periods)")
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		// The prefix's default is shown in the help, but only a prefix
		// given counts as an etcd flag (refused with the bolt store).
		if !cmd.Flags().Changed("etcd-prefix") {
			o.Etcd.Prefix = ""
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
