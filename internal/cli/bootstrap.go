package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/bootstrap"
)

// bootstrapFlags are bootstrap's flags, as given.
type bootstrapFlags struct {
	o         bootstrap.Options
	grpc, tls bool
	locality  string
	metadata  []string
	t         bootstrap.TLS
}

func newBootstrap() *cobra.Command {
	var b bootstrapFlags
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Print a bootstrap config that points Envoy (YAML) or a gRPC client (--grpc, JSON) at Pylon",
		Long: `Print a bootstrap config that points Envoy (YAML) or a gRPC client (--grpc, JSON) at Pylon.

With --tls the node connects over TLS: it verifies Pylon's certificate with
--ca-file and, given --cert-file and --key-file, presents its own, which Pylon
binds to the node id (pylon serve --node-identity). The bootstrap names the
files, never their contents; gRPC re-reads them every --refresh-interval.`,
		Example: `  pylon bootstrap --node-id edge-1 --cluster edge > envoy.yaml && envoy -c envoy.yaml
  pylon bootstrap --grpc --node-id app-1 > xds-bootstrap.json && GRPC_XDS_BOOTSTRAP=xds-bootstrap.json ./app
  pylon bootstrap --grpc --node-id app-1 --locality eu-west1/eu-west1-b --metadata mesh=true --metadata team=payments
  pylon bootstrap --grpc --server --cert-dir /etc/greeter/certs --node-id greeter-1 --cluster greeter-servers
  pylon bootstrap --grpc --tls --ca-file ca.crt --cert-file app-1.crt --key-file app-1.key \
    --node-id app-1 --cluster apps --xds-address pylon.internal:18000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return b.run(cmd) },
	}
	b.register(cmd)
	_ = cmd.MarkFlagRequired("node-id")
	cmd.MarkFlagsRequiredTogether("cert-file", "key-file")
	return cmd
}

func (b *bootstrapFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.o.NodeID, "node-id", "", "the node's id (required)")
	f.StringVar(&b.o.NodeCluster, "cluster", "", "the node's cluster (node.cluster)")
	alias(f, "node-cluster", "cluster")
	f.StringVar(&b.o.XDSAddress, "xds-address", "127.0.0.1:18000", "Pylon's xDS address as the node reaches it")
	f.BoolVar(&b.o.Delta, "delta", false, "use incremental xDS (DELTA_GRPC) in the Envoy bootstrap")
	f.Uint32Var(&b.o.AdminPort, "admin-port", 9901, "Envoy admin port, bound on 127.0.0.1")
	f.StringVar(&b.locality, "locality", "", "the node's locality, region[/zone[/sub_zone]] (node.locality, which groups match)")
	// StringArray, not StringSlice: a value may contain commas.
	f.StringArrayVar(&b.metadata, "metadata", nil, "key=value in the node's metadata, repeatable (node.metadata, whose string values groups match)")
	f.BoolVar(&b.grpc, "grpc", false, "print the JSON bootstrap of a proxyless gRPC client instead")
	f.BoolVar(&b.tls, "tls", false, "connect to Pylon over TLS (needs --ca-file)")
	f.StringVar(&b.t.CAFile, "ca-file", "", "with --tls: CA bundle that verifies Pylon's certificate")
	f.StringVar(&b.t.CertFile, "cert-file", "", "with --tls: the node's client certificate (mutual TLS)")
	f.StringVar(&b.t.KeyFile, "key-file", "", "with --tls: the node's client key")
	f.StringVar(&b.t.ServerName, "server-name", "", "with --tls: the name Pylon's certificate must carry (Envoy; default: the host of --xds-address)")
	f.DurationVar(&b.t.RefreshInterval, "refresh-interval", time.Minute, "with --tls --grpc: how often gRPC re-reads the certificate files")
	f.BoolVar(&b.o.Server, "server", false, "with --grpc: the bootstrap of an xDS-enabled gRPC server (names the Listener it fetches for its address)")
	f.StringVar(&b.o.CertDir, "cert-dir", "", "with --grpc: a directory of tls.crt, tls.key and ca.crt, the certificate provider \"default\" that TLS from xDS uses (re-read every minute)")
}

// run prints the bootstrap the flags describe.
func (b *bootstrapFlags) run(cmd *cobra.Command) error {
	if cmd.Flags().Changed("locality") {
		l, err := bootstrap.ParseLocality(b.locality)
		if err != nil {
			return fmt.Errorf("--locality: %w", err)
		}
		b.o.Locality = l
	}
	md, err := bootstrap.ParseMetadata(b.metadata)
	if err != nil {
		return fmt.Errorf("--metadata: %w", err)
	}
	b.o.Metadata = md
	// A TLS file without --tls would silently print a plaintext
	// bootstrap; a gRPC server's flags would be dropped from Envoy's.
	if err := needs(cmd, b.tls, "tls", "ca-file", "cert-file", "key-file", "server-name", "refresh-interval"); err != nil {
		return err
	}
	if err := needs(cmd, b.grpc, "grpc", "server", "cert-dir"); err != nil {
		return err
	}
	if b.tls {
		b.o.TLS = &b.t
	}
	var out []byte
	if b.grpc {
		out, err = bootstrap.GRPC(b.o)
	} else {
		out, err = bootstrap.EnvoyYAML(b.o)
	}
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// needs refuses the flags names when the flag owner they belong to is not
// on.
func needs(cmd *cobra.Command, on bool, owner string, names ...string) error {
	if on {
		return nil
	}
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s needs --%s", name, owner)
		}
	}
	return nil
}
