// Package daemon is the composition root of `pylon serve`: it wires the
// config source, the pipeline, the xDS server and the admin API, runs them
// together and stops them gracefully.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/pylon-xds/pylon/internal/admin"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/csds"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/fleetstatus"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/secretfile"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/file"
	"github.com/pylon-xds/pylon/internal/source/git"
	"github.com/pylon-xds/pylon/internal/source/kube"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd"
	"github.com/pylon-xds/pylon/internal/token"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Options configures the daemon. The zero value of a duration takes the
// default given.
type Options struct {
	// ConfigPath is a config file or folder (file mode); "" keeps the
	// config in the embedded store in DataDir, changed through the admin
	// API (the default).
	ConfigPath string
	// Git, with a URL, reads the config from a Git repository (a third
	// mode, beside file and store mode; see GitOptions).
	Git GitOptions
	// git is the source built from Git by Run.
	git *git.Source
	// spacing spaces a burst's publishes by the responses the last ones
	// sent (fanout); set by Run.
	spacing func() time.Duration
	// DataDir holds the embedded store (default "pylon-data"); a fresh one
	// is seeded with the quickstart config.
	DataDir string
	// TokenFile holds the admin API's write token (default
	// DataDir/admin-token, generated on first start).
	TokenFile string
	// Store is where the config is kept without ConfigPath: "bolt" (the
	// default, in DataDir) or "etcd" (shared by several replicas; see
	// Etcd). DataDir still holds the token files in etcd mode.
	Store string
	Etcd  EtcdOptions
	// Kube adds a Kubernetes cluster's Services and EndpointSlices to
	// the config of either mode (off by default; see kube.go).
	Kube KubeOptions
	// EncryptionKeyFile, when set, lists the keys that seal what Pylon
	// keeps at rest: every stored object and past version (bbolt or
	// etcd) and the rollout state file (see package seal and
	// docs/security.md). Read once, at start.
	EncryptionKeyFile string
	// ring is the keyring read from EncryptionKeyFile by Run.
	ring *seal.Keyring
	// FleetStatusPeriod and FleetStatusTTL: how often this replica
	// publishes its proxies' summary to etcd, and how long it outlives
	// the replica (see fleetstatus.Options; defaults 5s and 3 periods).
	FleetStatusPeriod, FleetStatusTTL time.Duration
	// Replicas: load balancing and sharding (shard.go).
	Replicas ReplicaOptions
	// HistoryLimit bounds the stored config history (default 100).
	HistoryLimit int
	XDSAddr      string // default ":18000"
	// REST serves xDS as REST-JSON polling (rule X44) on its own listener;
	// off unless REST.Addr is set (see RESTOptions in rest.go, docs/rest.md).
	REST      RESTOptions
	AdminAddr string // default "127.0.0.1:19000"
	// DebounceQuiet and DebounceMax batch bursts of file events
	// (defaults 100ms and 1s).
	DebounceQuiet time.Duration
	DebounceMax   time.Duration
	// DebounceSettle, when positive, reads a config file written in place
	// after a quiet spell once its writes settle this long, rather than
	// DebounceQuiet (file.Options.Settle): for writers that write files
	// whole, never pausing mid-file.
	DebounceSettle time.Duration
	// Resync re-reads the config this often (default 30s; negative
	// disables).
	Resync time.Duration
	// ShutdownGrace bounds a graceful stop (default 10s) after the drain.
	ShutdownGrace time.Duration
	// DrainPeriod is how long a graceful stop spends handing the proxies
	// over to other replicas before it stops (see xds.Server.Drain): not
	// ready at once, no new streams, the open ones ended spread over the
	// period. The admin API, the config sources and the fleet status
	// keep running meanwhile. The drain takes at most the period and a
	// tenth of it (at least 1s); a stop-now (WithStopNow) cuts it short.
	// Zero: no drain (the CLI's default is 30s, but 0 with the embedded
	// bolt store, where no other replica can exist).
	DrainPeriod time.Duration
	// Identifier names this replica in xDS responses and the admin API.
	Identifier string
	// SuppressDeltaNotFound, HoldTimeout, MaxInitialSends and
	// NewStreamsPerSecond: see xds.Options.
	SuppressDeltaNotFound bool
	HoldTimeout           time.Duration
	MaxInitialSends       int
	NewStreamsPerSecond   float64
	// MaxConnectionAge ends client connections after about that long
	// (default DefaultMaxConnectionAge; negative: never), so that
	// long-lived streams rebalance across replicas (after a scale-up, say)
	// and no connection outlives its client's credentials by much: a
	// reconnect handshakes again, against the client CAs of the day. gRPC
	// (grpc-go's server transport) adds a random jitter of up to ±10% to
	// the age of each connection, so that connections opened together do
	// not all end together: at the age it sends GOAWAY (no new streams on
	// the connection), and MaxConnectionAgeGrace later it closes the
	// connection, ending the streams still open on it; their clients
	// reconnect, to this replica or another. An xDS stream never ends by
	// itself, so the grace only delays its end: gRPC's own default grace
	// (forever) would leave every ADS stream on its old connection and
	// rebalance nothing. Zero grace with an age set is
	// DefaultMaxConnectionAgeGrace. A connection's streams end between
	// 0.9*age+grace and 1.1*age+grace+1s after it opened (once the grace
	// is over, gRPC waits up to a second for the client to close the
	// connection before it closes it itself).
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// MaxResourceNames, MaxStreamsPerConnection and SendStall: see
	// xds.Options (zero: its defaults).
	MaxResourceNames        int
	MaxStreamsPerConnection uint32
	SendStall               time.Duration

	// XDSTLS serves xDS over TLS; with a client CA, client certificates are
	// verified when given (and required with XDSRequireClientCert). Zero:
	// plaintext, with a warning when beyond loopback.
	XDSTLS               TLSFiles
	XDSRequireClientCert bool
	// NodeIdentity binds node ids to verified client certificates, e.g.
	// "spiffe://{trust_domain}/ns/{cluster}/sa/{id}" (identity.ParseRule);
	// TrustDomain fills {trust_domain}. Needs XDSTLS.ClientCA.
	NodeIdentity, TrustDomain string
	// InsecureServeSecrets serves Secrets over connections without a
	// verified client certificate.
	InsecureServeSecrets bool
	// CSDSIdentities are the client certificate identities (globs, as in
	// group identities) allowed to call CSDS on the xDS port without a
	// token; callers presenting the admin read or write token always may.
	CSDSIdentities []string
	// AdminTLS serves the admin API over TLS. Without it the admin API
	// refuses a non-loopback address unless AdminInsecure.
	AdminTLS      TLSFiles
	AdminInsecure bool
	// AdminLimits bound the admin HTTP server (zero fields: defaults).
	AdminLimits AdminLimits
	// TLSCheckEvery is how often certificate files, and the admin token
	// files, are checked for a rotation, at most (default 1s).
	TLSCheckEvery time.Duration
	// ReadTokenFile holds the admin API's read token (default
	// DataDir/read-token, generated on first start).
	ReadTokenFile string
	// RelayTokenFile holds the token relays post their reports with
	// (--relay-token-file; read at start, daemon/relaytoken.go); empty:
	// reports need the write token.
	RelayTokenFile string
	// SecretDirs are the only folders secret files named by the config are
	// read from (default: the config's folder in file mode, the working
	// directory at start in store mode). DataDir is never read.
	SecretDirs []string

	// Reload, when it receives (SIGHUP), re-reads the admin token files,
	// the TLS certificate files, and the config (file mode) or the secret
	// files it names (store mode) at once, without waiting for their
	// periodic checks; nil never does.
	Reload <-chan os.Signal

	Version string
	Logger  *slog.Logger
	// OnReady, if set, is called with the bound addresses once both
	// listeners are open and the first config is published.
	OnReady func(xdsAddr, adminAddr string)
}

// DefaultMaxConnectionAge is how long a client connection lives when
// Options.MaxConnectionAge is zero, as in Istio: short enough that
// connections rebalance and re-handshake within the hour, long enough
// that the reconnects cost little (a reconnecting client tells what it
// holds, and what did not change is not sent again).
const DefaultMaxConnectionAge = 30 * time.Minute

// DefaultMaxConnectionAgeGrace is the grace a connection gets past its
// maximum age when none is set: long enough for a response being written
// to reach even a slow client, short enough that the rebalance happens
// about when the age says.
const DefaultMaxConnectionAgeGrace = 10 * time.Second

func (o *Options) defaults() {
	if o.XDSAddr == "" {
		o.XDSAddr = ":18000"
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:19000"
	}
	if o.DebounceQuiet == 0 {
		o.DebounceQuiet = 100 * time.Millisecond
	}
	if o.DebounceMax == 0 {
		o.DebounceMax = time.Second
	}
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	if o.MaxConnectionAge == 0 {
		o.MaxConnectionAge = DefaultMaxConnectionAge
	}
	if o.MaxConnectionAge > 0 && o.MaxConnectionAgeGrace <= 0 {
		o.MaxConnectionAgeGrace = DefaultMaxConnectionAgeGrace
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DataDir == "" {
		o.DataDir = "pylon-data"
	}
	if o.TokenFile == "" {
		o.TokenFile = filepath.Join(o.DataDir, "admin-token")
	}
	if o.ReadTokenFile == "" {
		o.ReadTokenFile = filepath.Join(o.DataDir, "read-token")
	}
	o.AdminLimits.defaults()
}

// Run serves until ctx ends, then stops gracefully and returns nil; it
// returns an error if the initial config is refused or a component fails.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	log := o.Logger
	sec, secrets, err := checkStart(&o)
	if err != nil {
		return err
	}
	read := secrets.Read
	reg, pub := xdstype.New(), fleet.NewPublisher()
	obs := NewObservability(reg, pub)
	fan := &fanout{responses: sentResponses(obs.Tracker)}
	o.spacing = fan.spacing(o.DebounceQuiet, o.DebounceMax)
	tracker, met := obs.Tracker, obs.Metrics
	reread := make(chan struct{}, 1)
	src := newSources(o, met, firstDir(secrets), reread, log)
	if src.kube, err = newKube(o, met, log); err != nil {
		return err
	}
	observeGit(o.git, met)
	paceGit(o.git, o.spacing)
	rollouts, pipe, err := newPipeline(o, sec, reg, pub, obs, read, src.watch, log)
	if err != nil {
		return err
	}

	cfgSvc, st, closeStore, err := loadInitial(ctx, o, reg, pipe, read, rollouts.Check, src.kube)
	if err != nil {
		return err
	}
	defer closeStore()
	tokens, err := loadTokens(o)
	if err != nil {
		return err
	}

	lis, err := listen(o)
	if err != nil {
		return err
	}

	// The fleet status says when this replica drains; the stopper is made
	// below, before anything runs.
	var stop *stopper
	relays := admin.NewRelayReports() // posted here, published to the other replicas
	announce := make(chan struct{})
	fleet := newFleetStatus(o, st, tracker, lis, func() bool { return stop.Draining() }, announce, relays.Published, log)
	bal, shard := replicaXDS(o, fleet, met)
	xdsSrv, gs := newXDS(o, sec, reg, pub, status.ComposeObservers(obs.Observer, rollouts), obs.Tracker, tokens, bal, shard)
	reportExpiry(met, sec, xdsSrv)
	adminOpts := adminOptions(o, tokens, pipe, obs, pub, reg)
	if adminOpts.RelayToken, err = relayToken(o.RelayTokenFile, tokens); err != nil {
		return err
	}
	adminOpts.Sources, adminOpts.RelayReports = kubeStatus(src.kube), relays
	if cfgSvc != nil {
		// Only a shared store is ever away; the embedded one answers
		// false.
		adminOpts.Config, adminOpts.Degraded = cfgSvc, cfgSvc.Degraded
	}
	if fleet != nil {
		adminOpts.Fleet = fleet
	}
	stop = &stopper{
		period: o.DrainPeriod, grace: o.ShutdownGrace, log: log, gs: gs, xds: xdsSrv, lis: lis.xds,
		now: StopNow(ctx), streams: func() int { return openStreams(tracker) }, announce: announce,
	}
	if fleet != nil {
		stop.announced = o.FleetStatusPeriod
	}
	adminOpts.Draining, adminOpts.Rollouts, adminOpts.Shard = stop.Draining, rollouts, shardName(o)
	if o.git != nil {
		adminOpts.PollGit, adminOpts.ConfigPath = o.git.PollNow, o.git.Shown()+" ("+o.git.Where()+")"
	}
	stop.http = newAdminServer(admin.Handler(adminOpts), o.AdminLimits, sec.adminTLS, log)

	// The components outlive ctx by the drain: the config keeps flowing
	// to the streams not yet handed over, and the fleet status keeps
	// publishing, so that the other replicas see this one's proxies leave.
	runCtx, endRun := context.WithCancel(context.WithoutCancel(ctx))
	defer endRun()
	g, gctx := errgroup.WithContext(runCtx)
	if fleet != nil {
		g.Go(func() error { return fleet.Run(gctx) })
		g.Go(func() error { return xdsSrv.Balance(gctx) })
	}
	g.Go(func() error { return rollouts.Run(gctx) })
	g.Go(func() error { return stop.serveXDS(xdsSrv.Listener(lis.xds)) })
	watchCerts(gctx, g, o, sec, xdsSrv)
	g.Go(func() error { return serveAdmin(stop.http, lis.admin, o.AdminLimits) })
	serveREST(gctx, g, o, lis.rest, sec, xdsSrv, log)
	if o.Reload != nil {
		g.Go(func() error { return reloadOn(gctx, o.Reload, reread, tokens, sec, log) })
	}
	src.run(gctx, g, pipe, cfgSvc)
	g.Go(func() error {
		stop.run(ctx, gctx)
		endRun()
		return stop.shutdown()
	})

	log.Info("pylon serving", "xds", lis.xds.Addr().String(), "admin", lis.admin.Addr().String(), "version", pipe.Status().Version,
		"xds_tls", sec.xdsTLS != nil, "admin_tls", sec.adminTLS != nil)
	if o.OnReady != nil {
		o.OnReady(lis.xds.Addr().String(), lis.admin.Addr().String())
	}
	return g.Wait()
}

// adminOptions are the admin API's options that the start-up's first
// stages give; Run adds the store's, the fleet status's and the stopper's.
func adminOptions(o Options, tokens *token.Files, pipe *pipeline.Pipeline, obs *Observability, pub *fleet.Publisher, reg *xdstype.Registry) admin.Options {
	return admin.Options{
		Tokens: tokens, TokenFile: o.TokenFile, ReadTokenFile: o.ReadTokenFile, RelayTokenFile: o.RelayTokenFile,
		Pipeline: pipe, Proxies: obs.Tracker, Fleets: pub, Registry: reg,
		Metrics: obs.Metrics.Registry, Registerer: obs.Metrics.Registry,
		Identifier: o.Identifier, Version: o.Version, Logger: o.Logger, ConfigPath: o.ConfigPath,
	}
}

// checkStart checks what a start-up must refuse before anything is read
// or bound (the store's settings, the keyring, the Git source, the
// certificates and identity rule, what the addresses expose), and returns
// the security settings and the secret files' reader. It fills o's keyring
// and Git source.
func checkStart(o *Options) (*security, *secretfile.Reader, error) {
	log := o.Logger
	if err := checkStore(*o); err != nil {
		return nil, nil, err
	}
	ring, err := loadKeyring(*o, log)
	if err != nil {
		return nil, nil, err
	}
	o.ring = ring
	if o.git, err = newGit(*o, log); err != nil {
		return nil, nil, err
	}
	sec, err := loadSecurity(*o)
	if err != nil {
		return nil, nil, err
	}
	if err := checkExposure(*o, sec, o.XDSAddr, o.AdminAddr, log); err != nil {
		return nil, nil, err
	}
	if err := checkREST(*o, sec, log); err != nil {
		return nil, nil, err
	}
	if err := checkReplicas(*o); err != nil {
		return nil, nil, err
	}
	secrets, err := secretReader(*o)
	if err != nil {
		return nil, nil, err
	}
	return sec, secrets, nil
}

// newPipeline is the config pipeline and the rollout controller it
// publishes through, to pub; its results are reported to obs, what each
// published fleet exposes under the identity binding is logged (once per
// warning while it holds), and the files each good config read are told
// to watch. The stages are given at construction: the controller retries
// a refused change through a channel the pipeline reads.
func newPipeline(o Options, sec *security, reg *xdstype.Registry, pub *fleet.Publisher, obs *Observability, read compile.ReadFile, watch func([]string), log *slog.Logger) (*rollout.Controller, *pipeline.Pipeline, error) {
	retry := make(chan struct{}, 1)
	ctrl, err := newRollouts(o, sec, reg, pub, obs, read, retry, log)
	if err != nil {
		return nil, nil, err
	}
	b, warned := sec.binding(), map[string]bool{}
	pipe := pipeline.New(pipeline.Options{
		Registry: reg, Read: read, Publish: ctrl.Publish, Retry: retry, OnFiles: watch, Logger: log, Groups: o.Replicas.Groups,
		OnResult: func(result string, f *fleet.Fleet) {
			obs.Metrics.Publish(result)
			if f != nil {
				obs.Published(f)
				warned = warnExposures(f.Exposures(b), warned, log)
			}
		},
	})
	return ctrl, pipe, nil
}

// listeners are the server's: xDS, admin and, with --xds-rest-addr, REST.
type listeners struct {
	xds, admin, rest net.Listener
}

// listen opens the xDS, admin and REST listeners.
func listen(o Options) (listeners, error) {
	xdsLis, err := net.Listen("tcp", o.XDSAddr)
	if err != nil {
		return listeners{}, fmt.Errorf("xds listener: %w", err)
	}
	adminLis, err := net.Listen("tcp", o.AdminAddr)
	if err != nil {
		xdsLis.Close()
		return listeners{}, fmt.Errorf("admin listener: %w", err)
	}
	restLis, err := listenREST(o)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return listeners{}, err
	}
	return listeners{xds: xdsLis, admin: adminLis, rest: restLis}, nil
}

// newFleetStatus is, on the etcd store, what publishes this replica's
// proxies and reads the others' (nil otherwise: one replica, no merge).
func newFleetStatus(o Options, st store.Store, tracker *status.Tracker, lis listeners, draining func() bool, announce <-chan struct{}, relays func() []fleetstatus.Relay, log *slog.Logger) *fleetstatus.Fleet {
	es, ok := st.(*etcd.Store)
	if !ok {
		return nil
	}
	return fleetstatus.New(fleetstatus.Options{
		Replica: o.Identifier, Store: es, Local: tracker.Streams,
		Period: o.FleetStatusPeriod, TTL: o.FleetStatusTTL, Logger: log, Self: selfOf(o, lis.xds), Draining: draining,
		Announce: announce, Relays: relays,
	})
}

// loadInitial opens the config source (the store, or the file) and applies
// its config before anything listens: with no last good config to fall back
// on, a bad one is a startup error, not a silent empty fleet. In store mode
// it returns the config service and the store it opened; closeStore closes
// the store.
// gate refuses a write before it is stored (a halted rollout's group).
// With the Kubernetes source, the cluster's files join the first config.
func loadInitial(ctx context.Context, o Options, reg *xdstype.Registry, pipe *pipeline.Pipeline, read compile.ReadFile, gate func(*fleet.Fleet) error, k8s *kube.Source) (cfgSvc *configstore.Service, st store.Store, closeStore func(), err error) {
	closeStore = func() {}
	initial := source.Update{AcceptedAt: time.Now()}
	switch {
	case o.git != nil:
		initial = o.git.Read(ctx)
		o.Logger.Info("serving the config of a Git repository; change it with a push", "repository", o.git.Shown(), "ref", o.Git.Ref, "commit", initial.Revision)
	case o.ConfigPath == "":
		st, err = openStore(ctx, o, reg, o.Logger)
		if err != nil {
			return nil, nil, nil, err
		}
		closeStore = func() { st.Close() }
		cfgSvc = configstore.New(configstore.Options{
			Store: st, Registry: reg, Read: read, Keep: o.HistoryLimit, Debounce: o.DebounceQuiet, Spacing: o.spacing, Logger: o.Logger, Probe: o.Etcd.Probe,
			Gate: gate, Extra: kubeFiles(k8s), Cache: pipe.Cache().Whole(),
		})
		initial.Files, initial.Err = cfgSvc.Current(ctx)
		logServing(o)
	default:
		initial.Files, initial.Err = file.Read(o.ConfigPath)
	}
	kubeInitial(ctx, k8s, &initial)
	if err := pipe.Apply(initial); err != nil {
		closeStore()
		return nil, nil, nil, fmt.Errorf("initial config refused: %w", err)
	}
	return cfgSvc, st, closeStore, nil
}

// logServing says where the config served comes from and how to change it.
func logServing(o Options) {
	const how = "change it with the admin API of any replica (pylon apply, pylon endpoints ...)"
	if o.Store == StoreEtcd {
		o.Logger.Info("serving the config kept in etcd; "+how, "etcd_endpoints", strings.Join(o.Etcd.Endpoints, ","), "etcd_prefix", etcdPrefix(o.Etcd))
		return
	}
	o.Logger.Info("serving the config kept in the embedded store; change it with the admin API (pylon apply, pylon endpoints ...)", "data_dir", o.DataDir)
}

// etcdPrefix is the prefix the store uses.
func etcdPrefix(e EtcdOptions) string {
	if e.Prefix == "" {
		return etcd.DefaultPrefix
	}
	return e.Prefix
}

// loadTokens reads the admin API's tokens, generating them on first start:
// reads of status, dumps and stored config need one in both modes, and the
// write token reads too. The files are followed: a rotation takes effect
// within TLSCheckEvery (1s by default), or at once on SIGHUP.
func loadTokens(o Options) (*token.Files, error) {
	for _, f := range []string{o.TokenFile, o.ReadTokenFile} {
		if err := ensureToken(f); err != nil {
			return nil, err
		}
	}
	return token.LoadFiles(token.FilesOptions{WriteFile: o.TokenFile, ReadFile: o.ReadTokenFile, CheckEvery: o.TLSCheckEvery, Logger: o.Logger})
}

// newXDS is the xDS server and the gRPC server it is registered on, which
// serves CSDS too: standard tools read each proxy's status on the port they
// already reach, with an admin token or an allowed client certificate.
// Streams report to observer: the tracking, composed with the rollouts'.
func newXDS(o Options, sec *security, reg *xdstype.Registry, pub *fleet.Publisher, observer status.Observer, tracker *status.Tracker, tokens *token.Files, bal *xds.Balance, shard *xds.Shard) (*xds.Server, *grpc.Server) {
	xdsSrv := xds.New(xds.Options{
		Registry: reg, Fleets: pub, Identifier: o.Identifier, Logger: o.Logger,
		SuppressDeltaNotFound: o.SuppressDeltaNotFound, HoldTimeout: o.HoldTimeout,
		MaxInitialSends: o.MaxInitialSends, NewStreamsPerSecond: o.NewStreamsPerSecond,
		Observer: observer,
		Identity: sec.identity, InsecureServeSecrets: o.InsecureServeSecrets,
		MaxResourceNames: o.MaxResourceNames, MaxStreamsPerConnection: o.MaxStreamsPerConnection, SendStall: o.SendStall,
		Balance: bal, Shard: shard,
	})
	gs := grpc.NewServer(grpcOptions(o, xdsSrv, sec)...)
	xdsSrv.Register(gs)
	csds.New(csds.Options{
		Tracker: tracker, Registry: reg, Logger: o.Logger,
		Authorize: csds.TokenOrIdentity(func() string { return tokens.Current().Read }, o.CSDSIdentities),
	}).Register(gs)
	return xdsSrv, gs
}

// grpcOptions are the xDS gRPC server's options: the xds package's own,
// keepalive, and TLS when configured.
func grpcOptions(o Options, xdsSrv *xds.Server, sec *security) []grpc.ServerOption {
	opts := append(xdsSrv.GRPCOptions(),
		// Envoy's bootstrap pings every 30s; allow that and detect clients
		// that vanished without closing their connection.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: 30 * time.Second, Timeout: 10 * time.Second,
			// A negative age is never, gRPC's zero.
			MaxConnectionAge: max(o.MaxConnectionAge, 0), MaxConnectionAgeGrace: o.MaxConnectionAgeGrace,
		}),
	)
	if sec.xdsTLS != nil {
		// A handshake that does not finish cannot hold a connection for
		// long (grpc's default is 120s).
		opts = append(opts, grpc.Creds(xdsSrv.Credentials(credentials.NewTLS(sec.xdsTLS.Config()))), grpc.ConnectionTimeout(10*time.Second))
	}
	return opts
}

// sources is what feeds the pipeline: in file mode the config file or
// folder, in store mode the store's service; in both, the certificates and
// keys the config names are watched: a rotation re-reads the config, and
// only the changed Secret is pushed.
type sources struct {
	file      *file.Source // file mode
	git       *git.Source  // Git mode
	certs     *file.Files  // store and Git mode: the config did not change on a rotation
	kube      *kube.Source // with --kubeconfig: joins either mode's config
	secretDir string
}

// newSources is the watchers of o's mode, not yet running.
func newSources(o Options, met *metrics.Metrics, secretDir string, reread <-chan struct{}, log *slog.Logger) *sources {
	resync := max(o.Resync, 0)
	if o.ConfigPath == "" {
		return &sources{secretDir: secretDir, git: o.git, certs: file.NewFiles(file.FilesOptions{
			Quiet: o.DebounceQuiet, MaxWait: o.DebounceMax, Resync: resync, Reread: reread, Logger: log, OnEvent: met.SourceEvent,
		})}
	}
	return &sources{secretDir: secretDir, file: file.New(file.Options{
		Path: o.ConfigPath, Quiet: o.DebounceQuiet, MaxWait: o.DebounceMax, Settle: o.DebounceSettle, Spacing: o.spacing, Resync: resync, Reread: reread, Logger: log,
		OnEvent: met.SourceEvent, OnRead: met.Reload,
	})}
}

// watch is the pipeline's OnFiles: the files a good config read, watched
// from then on. It never blocks.
func (s *sources) watch(paths []string) {
	paths = under(s.secretDir, paths)
	if s.certs != nil {
		s.certs.Watch(paths)
		return
	}
	s.file.Watch(paths)
}

// run starts the sources and the pipeline they feed; cfgSvc is the store's
// service in store mode.
func (s *sources) run(ctx context.Context, g *errgroup.Group, pipe *pipeline.Pipeline, cfgSvc *configstore.Service) {
	updates := make(chan source.Update)
	own := withKube(ctx, g, s.kube, updates)
	if s.certs != nil {
		// The latest stored update is replayed on a rotation, and the
		// pipeline re-reads the files.
		stored := make(chan source.Update)
		g.Go(func() error { return s.certs.Run(ctx) })
		g.Go(func() error { return s.runConfig(ctx, cfgSvc, stored) })
		g.Go(func() error { return source.Replay(ctx, stored, s.certs.Changed(), own) })
		g.Go(func() error { return pipe.Run(ctx, updates) })
		return
	}
	g.Go(func() error { return s.file.Run(ctx, own) })
	g.Go(func() error { return pipe.Run(ctx, updates) })
}

// runConfig runs the source of the config in store or Git mode.
func (s *sources) runConfig(ctx context.Context, cfgSvc *configstore.Service, out chan<- source.Update) error {
	if s.git != nil {
		return s.git.Run(ctx, out)
	}
	return cfgSvc.Run(ctx, out)
}

// firstDir is the secret directory relative secret paths are read under.
func firstDir(r *secretfile.Reader) string {
	if dirs := r.Dirs(); len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

// under makes relative paths absolute under dir, as the secret reader reads
// them (a store's config names certificates relative to the first secret
// directory), so that the watch is on the file that is read.
func under(dir string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out[i] = p
	}
	return out
}

// secretReader confines the files a config may name to the secret
// directories; Pylon's own data, tokens and TLS keys are never read.
func secretReader(o Options) (*secretfile.Reader, error) {
	dirs := o.SecretDirs
	if len(dirs) == 0 {
		dir, err := defaultSecretDir(o.ConfigPath)
		if err != nil {
			return nil, err
		}
		if dir != "" {
			dirs = []string{dir}
		} else {
			o.Logger.Warn("no secret directory: the default would be the file system's root, so secret files are refused until --secret-dir names a folder")
		}
	}
	// The etcd client key gives write access to every replica's config:
	// a config naming it as a secret must not serve it to proxies.
	// So does the encryption key file: it opens what the store keeps.
	deny := []string{o.DataDir, o.TokenFile, o.ReadTokenFile, o.RelayTokenFile, o.XDSTLS.Key, o.AdminTLS.Key, o.Etcd.Key, o.EncryptionKeyFile}
	r, err := secretfile.New(dirs, deny)
	if err != nil {
		return nil, fmt.Errorf("--secret-dir: %w", err)
	}
	return r, nil
}

// defaultSecretDir is the config's folder in file mode, the working
// directory in store mode; "" when that is the file system's root (a
// service started without a working directory): the root as a secret
// directory would let whoever writes config serve any file on the host.
func defaultSecretDir(configPath string) (string, error) {
	dir := configPath
	if configPath == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	} else if fi, err := os.Stat(configPath); err != nil {
		return "", fmt.Errorf("config: %w", err)
	} else if !fi.IsDir() {
		dir = filepath.Dir(configPath)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real == string(filepath.Separator) {
		return "", nil
	}
	return dir, nil
}

// warnExposures logs each of the fleet's exposures that was not among
// those last logged, and returns what it holds now: a warning comes once
// per publish that introduces it, not on every publish.
func warnExposures(exposures []fleet.Exposure, warned map[string]bool, log *slog.Logger) map[string]bool {
	now := make(map[string]bool, len(exposures))
	for _, e := range exposures {
		now[e.Warning] = true
		if !warned[e.Warning] {
			log.Warn(e.Warning, "group", e.Group)
		}
	}
	return now
}
