package cli

import (
	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/fleet"
)

// addReplicaFlags registers how replicas on etcd share the fleet: load
// balancing within a shard, and the shard's node groups.
func addReplicaFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.BoolVar(&o.Replicas.Balance, "balance", true, "with --store etcd: over ceil(its shard's streams / live replicas x 1.1) (and the mean plus 2) refuse new xDS streams with RESOURCE_EXHAUSTED and shed the excess, delta streams first; --balance=false turns it off")
	f.Float64Var(&o.Replicas.ShedRate, "shed-rate", 0, "with --balance: the most streams shed a second (0: the default, 10)")
	groups := f.String("groups", "", "node groups this replica serves, a comma list of names or globs (default every group): the others are not compiled and their proxies are refused naming the shard that serves them")
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		sel, err := fleet.ParseSelector(*groups)
		if err != nil {
			return err
		}
		o.Replicas.Groups = sel
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
