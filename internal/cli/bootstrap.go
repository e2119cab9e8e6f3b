package cli

import (
	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/bootstrap"
)

func newBootstrap() *cobra.Command {
	var o bootstrap.Options
	var grpcClient bool
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Print a bootstrap config that points Envoy (YAML) or a gRPC client (--grpc, JSON) at Pylon",
		Example: `  pylon bootstrap --node-id edge-1 --node-cluster edge > envoy.yaml && envoy -c envoy.yaml
  pylon bootstrap --grpc --node-id app-1 > xds-bootstrap.json && GRPC_XDS_BOOTSTRAP=xds-bootstrap.json ./app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []byte
			var err error
			if grpcClient {
				out, err = bootstrap.GRPC(o)
			} else {
				out, err = bootstrap.EnvoyYAML(o)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.NodeID, "node-id", "", "the node's id (required)")
	f.StringVar(&o.NodeCluster, "node-cluster", "", "the node's cluster")
	f.StringVar(&o.XDSAddress, "xds-address", "127.0.0.1:18000", "Pylon's xDS address as the node reaches it")
	f.BoolVar(&o.Delta, "delta", false, "use incremental xDS (DELTA_GRPC) in the Envoy bootstrap")
	f.Uint32Var(&o.AdminPort, "admin-port", 9901, "Envoy admin port, bound on 127.0.0.1")
	f.BoolVar(&grpcClient, "grpc", false, "print the JSON bootstrap of a proxyless gRPC client instead")
	_ = cmd.MarkFlagRequired("node-id")
	return cmd
}
