package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
)

func newRelay(g *globals, a *adminFlags) *cobra.Command {
	var o daemon.Options
	var ro daemon.RelayOptions
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Serve xDS to a site's proxies from an upstream control plane, one stream per key",
		Long: `Serve xDS (state of the world and delta, ADS and per-type streams, with
status, metrics, the admin API and CSDS, as serve does) from an upstream xDS
server instead of a config: Pylon, or any delta ADS server (go-control-plane,
istiod).

Proxies are grouped by --key, a template over node fields ({cluster},
{locality.region}, {locality.zone}, {locality.sub_zone}, {metadata.NAME};
{id} is refused). Each key is one upstream delta ADS stream, opened by its
first proxy with the node id RELAY_ID/KEY and the key's fields, however many
proxies share it: every Listener and Cluster, and the routes, endpoints and
extension configs they name. Secrets are never relayed. A proxy without a
value for a key field is refused (FAILED_PRECONDITION), and a new key past
--max-keys too (RESOURCE_EXHAUSTED); a key no proxy used for --idle-key is
dropped.

Upstream outage: the proxies keep what they have; each key's last good config
is kept in --data-dir, so that a relay restarted meanwhile serves it at once.
A stream that fails moves to the next --upstream. A proxy's NACK is reported
upstream on its key's stream (once per upstream version), so the upstream's
pylon status shows it from the relay's node. See docs/relay.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			o.Logger = log
			o.Version, _ = binaryVersion()
			if o.AdminAddr, err = listenAddr(a.Addr, o.AdminTLS.Cert != ""); err != nil {
				return err
			}
			o.DataDir, o.AdminInsecure = a.DataDir, a.Insecure
			connectionAge(&o)
			if cmd.Flags().Changed("read-token-file") {
				o.ReadTokenFile = a.ReadTokenFile
			}
			return daemon.RunRelay(cmd.Context(), o, ro)
		},
	}
	cmd.SetUsageFunc(usageIn("relay", relaySections))
	addRelayFlags(cmd, &o, &ro)
	return cmd
}

// addRelayFlags are relay's flags: its own, and those it shares with serve.
func addRelayFlags(cmd *cobra.Command, o *daemon.Options, ro *daemon.RelayOptions) {
	f := cmd.Flags()
	f.StringSliceVar(&ro.Upstreams, "upstream", nil, "upstream xDS servers, HOST:PORT (comma-separated or repeated), tried in order: a failed stream moves to the next")
	f.StringArrayVar(&ro.UpstreamFor, "upstream-for", nil, "route keys to a shard: 'SELECTOR=HOST:PORT[,HOST:PORT]' (repeatable), the keys the selector (group names or globs, as serve's --groups) takes go to those upstreams; the first route taking a key wins, --upstream takes the rest")
	f.StringVar(&ro.UpstreamAdmin, "upstream-admin", "", "a Pylon upstream's admin API, https://HOST:PORT: key each proxy by the node group the upstream would put it in (its rules read from GET /v1/groups), instead of --key")
	f.StringVar(&ro.UpstreamReadTokenFile, "upstream-read-token-file", "", "with --upstream-admin: the file holding the upstream's read token")
	f.StringVar(&ro.UpstreamRelayTokenFile, "upstream-relay-token-file", "", "with --upstream-admin: the file holding the upstream's relay token (its --relay-token-file), to report the downstream status upstream; without it, none is reported")
	f.StringVar(&ro.Key, "key", relay.DefaultKey, "the key proxies are grouped by, one upstream stream each: a template of {cluster}, {locality.region}, {locality.zone}, {locality.sub_zone} and {metadata.NAME}")
	f.StringVar(&ro.ID, "relay-id", "", "the relay's node id upstream, each key's stream announcing RELAY_ID/KEY (default relay-HOSTNAME)")
	f.IntVar(&ro.MaxKeys, "max-keys", relay.DefaultMaxKeys, "most keys held at once: a proxy of a new key past it is refused with RESOURCE_EXHAUSTED")
	f.DurationVar(&ro.IdleKey, "idle-key", 5*time.Minute, "drop a key, its upstream stream and its kept config, once no proxy has used it for this long")
	f.IntVar(&ro.MaxResources, "max-key-resources", 100000, "most resources one key holds: an upstream response past it is NACKed")
	f.IntVar(&ro.StreamsPerConnection, "upstream-streams-per-connection", upstream.DefaultStreamsPerConnection, "most keys' streams on one upstream connection; keep it under the upstream's own bound (serve's --max-streams-per-connection, 100 by default), past which a key's stream would wait unanswered")
	f.StringVar(&ro.UpstreamCA, "upstream-ca", "", "reach the upstreams over TLS, verifying their certificates with this PEM CA bundle")
	f.StringVar(&ro.UpstreamCert, "upstream-cert", "", "with --upstream-ca: present this PEM client certificate to the upstreams (read at start)")
	f.StringVar(&ro.UpstreamKey, "upstream-key", "", "the upstream client certificate's PEM private key")
	f.StringVar(&ro.UpstreamServerName, "upstream-server-name", "", "the name the upstreams' certificates are verified for (default: the host of each --upstream)")
	f.StringVar(&o.XDSAddr, "xds-addr", ":18000", "address of the relay's xDS gRPC server")
	f.StringVar(&o.TokenFile, "admin-token-file", "", "the admin API's write token (default DATA_DIR/admin-token, generated on first start)")
	f.StringVar(&o.Identifier, "id", defaultIdentifier(), "this relay's name, sent as control_plane.identifier")
	f.DurationVar(&o.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long a graceful stop may take after the drain")
	f.DurationVar(&o.DrainPeriod, "drain-period", 0, "on SIGTERM or SIGINT: report not ready, take no new streams and end the open ones spread over this long, so proxies move to another relay (0: no drain)")
	f.DurationVar(&o.MaxConnectionAge, "max-connection-age", daemon.DefaultMaxConnectionAge, "close client connections after this long (±10%), so load rebalances across relays; 0: never")
	f.DurationVar(&o.MaxConnectionAgeGrace, "max-connection-age-grace", 0, "extra time open streams get when a connection reaches its maximum age (0: 10s when --max-connection-age is set)")
	f.IntVar(&o.MaxInitialSends, "max-initial-sends", 64, "streams sending their first, full-state responses at once (reconnect storms; negative: no bound)")
	f.Float64Var(&o.NewStreamsPerSecond, "new-streams-per-second", 0, "new xDS streams admitted per second, excess waiting up to 10s then told to retry (0: no bound)")
	f.IntVar(&o.MaxResourceNames, "max-resource-names", 0, "most resource names one xDS request may list (0: the default)")
	f.Uint32Var(&o.MaxStreamsPerConnection, "max-streams-per-connection", 0, "most concurrent xDS streams per client connection (0: the default)")
	f.DurationVar(&o.SendStall, "send-stall", 0, "a send to an xDS client that does not read has its connection closed once blocked 3x this long (0: the default, 10s)")
	f.StringVar(&o.XDSTLS.Cert, "xds-tls-cert", "", "serve xDS over TLS with this PEM certificate chain (re-read when it changes)")
	f.StringVar(&o.XDSTLS.Key, "xds-tls-key", "", "the xDS certificate's PEM private key")
	f.StringVar(&o.XDSTLS.ClientCA, "xds-client-ca", "", "verify xDS client certificates, when given, against these PEM CAs")
	f.BoolVar(&o.XDSRequireClientCert, "xds-require-client-cert", false, "refuse xDS clients without a verified client certificate")
	f.StringVar(&o.NodeIdentity, "node-identity", "", "bind node ids to client certificates, as serve's --node-identity")
	f.StringVar(&o.TrustDomain, "trust-domain", "", "the SPIFFE trust domain {trust_domain} stands for in --node-identity")
	f.StringSliceVar(&o.CSDSIdentities, "csds-identity", nil, "client certificate identities (globs) allowed to read CSDS on the xDS port; needs --xds-client-ca")
	f.StringVar(&o.AdminTLS.Cert, "admin-tls-cert", "", "serve the admin API over TLS with this PEM certificate chain (re-read when it changes)")
	f.StringVar(&o.AdminTLS.Key, "admin-tls-key", "", "the admin certificate's PEM private key")
	f.StringVar(&o.AdminTLS.ClientCA, "admin-client-ca", "", "verify admin client certificates, when given, against these PEM CAs")
	f.IntVar(&o.AdminLimits.MaxConns, "admin-max-conns", 2048, "admin API connections served at once")
}
