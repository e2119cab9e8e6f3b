package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/ctl"
	"github.com/pylon-xds/pylon/internal/daemon"
)

// defaultDrainPeriod is --drain-period's default where other replicas
// may take the proxies over.
const defaultDrainPeriod = 30 * time.Second

// drainDefault turns the drain off with the embedded store unless it was
// asked for: that store is one replica's alone, so its proxies have nowhere
// to go, and the next process cannot open the store until this one stops.
func drainDefault(o *daemon.Options, set bool) {
	if !set && o.ConfigPath == "" && o.Git.URL == "" && o.Store != daemon.StoreEtcd {
		o.DrainPeriod = 0
	}
}

// connectionAge maps --max-connection-age 0 (never) to the daemon's never,
// a negative age: the daemon's zero is its default.
func connectionAge(o *daemon.Options) {
	if o.MaxConnectionAge <= 0 {
		o.MaxConnectionAge = -1
	}
}

// listenAddr is the HOST:PORT serve's admin API listens on: --admin-addr
// as the other commands take it, its scheme (if any) agreeing with
// whether the API is served over TLS.
func listenAddr(addr string, overTLS bool) (string, error) {
	scheme, hostPort, err := ctl.Target(addr)
	switch {
	case err != nil:
		return "", err
	case scheme == "https" && !overTLS:
		return "", fmt.Errorf("--admin-addr %s: serving https needs --admin-tls-cert and --admin-tls-key", addr)
	case scheme == "http" && overTLS:
		return "", fmt.Errorf("--admin-addr %s: with --admin-tls-cert the API is served over https: write https:// or leave the scheme out", addr)
	}
	return hostPort, nil
}

// serveLong is serve's help text.
const serveLong = `Serve xDS (state of the world and delta, ADS and per-type streams).

By default the config lives in an embedded store in --data-dir (seeded with the
quickstart config when new) and changes through the admin API: pylon apply,
pylon endpoints, pylon rollback. With --config, it comes from a file or folder,
reloaded when it changes, and the API is read-only; with --config-git, from a
folder of a Git repository, polled for new commits (GET /status names the one
served).

A change that fails validation is refused as a whole, logged once and shown on
the admin API (GET /status); the previous config keeps serving.

Security: with --xds-tls-cert and --xds-tls-key xDS is served over TLS; with
--xds-client-ca client certificates are verified, and --node-identity binds
each node id to its certificate (a mismatch ends the stream with
PermissionDenied). Secrets go only to clients with a verified certificate
unless --insecure-serve-secrets. The admin API needs a token for everything
but /healthz, /readyz and /metrics: the read token (DATA_DIR/read-token) or the
write token (DATA_DIR/admin-token), both generated on first start. Beyond
loopback it needs TLS (--admin-tls-cert, --admin-tls-key) or --admin-insecure.
Certificate files are re-read when they change; open streams stay up, except
on a connection whose client certificate no longer verifies against a rotated
--xds-client-ca, or has expired: it is closed. Connections end after
--max-connection-age (30m, ±10%; 0: never) and reconnect.

Stopping: on SIGTERM or SIGINT, serve reports not ready (/readyz 503), takes
no new xDS connections and ends the open streams spread over --drain-period,
so that proxies move to the other replicas as a trickle; then it stops within
--shutdown-grace. A second signal stops at once; a third kills the process.

Reloading: the admin token files (rotated: the old tokens stop working),
certificate files and the config (file mode) are followed as they change;
SIGHUP re-reads them all at once and serve carries on.`

func newServe(g *globals, a *adminFlags) *cobra.Command {
	var o daemon.Options
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve xDS to a fleet of Envoys and gRPC clients",
		Long:  serveLong,
		Args:  cobra.NoArgs,
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
			o.DataDir = a.DataDir
			o.AdminInsecure = a.Insecure
			drainDefault(&o, cmd.Flags().Changed("drain-period"))
			connectionAge(&o)
			if cmd.Flags().Changed("read-token-file") {
				o.ReadTokenFile = a.ReadTokenFile
			}
			// SIGHUP re-reads the files while serving; caught only here, so
			// that other commands keep its default (they end with their
			// terminal).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			o.Reload = hup
			return daemon.Run(cmd.Context(), o)
		},
	}
	cmd.SetUsageFunc(usageIn("serve", serveSections))
	addServeFlags(cmd, &o)
	addSecurityFlags(cmd, &o)
	addStoreFlags(cmd, &o)
	addReplicaFlags(cmd, &o)
	addGitFlags(cmd, &o)
	addKubeFlags(cmd, &o)
	return cmd
}

// addServeFlags are serve's own flags: where the config comes from and
// how the xDS server and its streams behave.
func addServeFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.StringVar(&o.ConfigPath, "config", "", "serve a config file or folder of *.yaml/*.json files (file mode); without it, the config is kept in the embedded store in --data-dir")
	f.StringVar(&o.TokenFile, "admin-token-file", "", "the admin API's write token (default DATA_DIR/admin-token, generated on first start)")
	f.StringVar(&o.RelayTokenFile, "relay-token-file", "", "the token relays post their reports with (POST /v1/relays; it authorises nothing else), a 0600 file read at start; without it, reports need the write token")
	f.IntVar(&o.HistoryLimit, "history-limit", 100, "stored config revisions kept for history and rollback")
	f.StringVar(&o.XDSAddr, "xds-addr", ":18000", "address of the xDS gRPC server")
	f.StringVar(&o.REST.Addr, "xds-rest-addr", "", "also serve xDS as REST-JSON polling (Envoy's api_type REST) on this address, with the xDS TLS settings (off by default; see docs/rest.md)")
	f.DurationVar(&o.REST.Wait, "xds-rest-wait", 0, "long poll: how long a REST poll with nothing new waits for a change before 304 (0: answer at once; keep it below the clients' request_timeout, 1s by default in Envoy; at most 5m)")
	f.IntVar(&o.REST.MaxPolls, "xds-rest-max-polls", 1024, "REST polls served at once; beyond it a poll gets 503")
	f.StringSliceVar(&o.REST.AllowedHosts, "xds-rest-allowed-host", nil, "a host name REST polls may be addressed to (repeatable), beyond localhost, IP addresses and names without dots; polls for other names get 421 (a guard against DNS rebinding)")
	f.DurationVar(&o.DebounceQuiet, "debounce", 100*time.Millisecond, "reload once config files written in place have been quiet this long (a file renamed into place after a quiet spell is read at once); in a burst, the least time between two updates of any source (files, the API, Kubernetes, Git), more as the last update's responses to the proxies grow")
	f.DurationVar(&o.DebounceSettle, "debounce-settle", 0, "read a file written in place after a quiet spell once its writes settle this long (e.g. 10ms) rather than --debounce; only for writers that never pause mid-file, which would be read in part")
	f.DurationVar(&o.DebounceMax, "debounce-max", time.Second, "reload at most this long after the first change of a burst")
	f.DurationVar(&o.Resync, "resync", 30*time.Second, "re-read the config this often even without file events (negative: never)")
	f.DurationVar(&o.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long a graceful stop may take after the drain")
	f.DurationVar(&o.DrainPeriod, "drain-period", defaultDrainPeriod, "on SIGTERM or SIGINT: report not ready, take no new streams and end the open ones spread over this long, so proxies move to the other replicas as a trickle; a second signal stops at once (0 with the embedded bolt store unless set: no other replica can exist)")
	f.StringVar(&o.Identifier, "id", defaultIdentifier(), "this replica's name, sent as control_plane.identifier")
	f.DurationVar(&o.HoldTimeout, "hold-timeout", 15*time.Second, "longest a stream holds back a route for a client to ACK the clusters it names (make-before-break)")
	f.IntVar(&o.MaxInitialSends, "max-initial-sends", 64, "streams sending their first, full-state responses at once (reconnect storms; negative: no bound)")
	f.Float64Var(&o.NewStreamsPerSecond, "new-streams-per-second", 0, "new xDS streams admitted per second, excess waiting up to 10s then told to retry (0: no bound)")
	f.DurationVar(&o.MaxConnectionAge, "max-connection-age", daemon.DefaultMaxConnectionAge, "close client connections after this long (gRPC adds ±10% jitter per connection), so load rebalances across replicas and clients handshake again; 0: never")
	f.DurationVar(&o.MaxConnectionAgeGrace, "max-connection-age-grace", 0, "extra time open streams get when a connection reaches its maximum age (0: 10s when --max-connection-age is set)")
	f.BoolVar(&o.SuppressDeltaNotFound, "delta-suppress-not-found", false, "do not list subscribed names that do not exist in delta removed_resources (for old Envoys that took it as an unsubscription)")
}

func addSecurityFlags(cmd *cobra.Command, o *daemon.Options) {
	f := cmd.Flags()
	f.StringVar(&o.XDSTLS.Cert, "xds-tls-cert", "", "serve xDS over TLS with this PEM certificate chain (re-read when it changes)")
	f.StringVar(&o.XDSTLS.Key, "xds-tls-key", "", "the xDS certificate's PEM private key")
	f.StringVar(&o.XDSTLS.ClientCA, "xds-client-ca", "", "verify xDS client certificates, when given, against these PEM CAs")
	f.BoolVar(&o.XDSRequireClientCert, "xds-require-client-cert", false, "refuse xDS clients without a verified client certificate")
	f.StringVar(&o.NodeIdentity, "node-identity", "", "bind node ids to client certificates, e.g. 'spiffe://{trust_domain}/ns/{cluster}/sa/{id}' or '{id}.{cluster}.proxies.example.com' (DNS SAN)")
	f.StringVar(&o.TrustDomain, "trust-domain", "", "the SPIFFE trust domain {trust_domain} stands for in --node-identity")
	f.StringSliceVar(&o.CSDSIdentities, "csds-identity", nil, "client certificate identities (globs, e.g. spiffe://example.org/ns/ops/sa/*) allowed to read CSDS on the xDS port; needs --xds-client-ca")
	f.BoolVar(&o.InsecureServeSecrets, "insecure-serve-secrets", false, "INSECURE: serve Secrets (private keys) to clients without a verified client certificate")
	f.StringVar(&o.AdminTLS.Cert, "admin-tls-cert", "", "serve the admin API over TLS with this PEM certificate chain (re-read when it changes)")
	f.StringVar(&o.AdminTLS.Key, "admin-tls-key", "", "the admin certificate's PEM private key")
	f.StringVar(&o.AdminTLS.ClientCA, "admin-client-ca", "", "verify admin client certificates, when given, against these PEM CAs")
	f.IntVar(&o.AdminLimits.MaxConns, "admin-max-conns", 2048, "admin API connections served at once (each registrant keeping its connection alive holds one)")
	f.StringSliceVar(&o.SecretDirs, "secret-dir", nil, "a folder secret files named by the config may be read from (repeatable; default: the config's folder, or the working directory in store mode)")
	f.IntVar(&o.MaxResourceNames, "max-resource-names", 0, "most resource names one xDS request may list (0: the default)")
	f.Uint32Var(&o.MaxStreamsPerConnection, "max-streams-per-connection", 0, "most concurrent xDS streams per client connection (0: the default)")
	f.DurationVar(&o.SendStall, "send-stall", 0, "a send to an xDS client that does not read gives back its initial-send slot within 1s and, blocked 3x this long, has its connection closed (0: the default, 10s)")
}
