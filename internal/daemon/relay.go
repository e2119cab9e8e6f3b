package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/pylon-xds/pylon/internal/admin"
	"github.com/pylon-xds/pylon/internal/csds"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/metrics"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/relay/upstream"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/token"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// RelayOptions are what `pylon relay` adds to the options it shares with
// serve (the xDS and admin listeners, their TLS, the data folder, the
// tokens, the identity binding).
type RelayOptions struct {
	// Upstreams are the upstream xDS servers, HOST:PORT, in order of
	// preference.
	Upstreams []string
	// UpstreamFor routes keys to shards: each "SELECTOR=HOST:PORT,..."
	// sends the keys whose name the selector (group names or globs, as
	// serve's --groups) takes to those upstreams; the first that takes a
	// key wins, Upstreams take the rest.
	UpstreamFor []string
	// UpstreamAdmin is a Pylon upstream's admin API (https://HOST:PORT;
	// http only on loopback): the relay reads its group rules there (GET
	// /v1/groups) with the read token in UpstreamReadTokenFile, and keys
	// each proxy by its group instead of by Key.
	UpstreamAdmin, UpstreamReadTokenFile string
	// UpstreamRelayTokenFile, with UpstreamAdmin, holds the upstream's
	// relay token (its --relay-token-file), which the relay's reports of
	// its downstream status are posted with; without it, none is posted
	// (the read token does not authorise them).
	UpstreamRelayTokenFile string
	// ReportEvery is how often the relay reports its downstream status to
	// UpstreamAdmin (default relay.DefaultReportEvery).
	ReportEvery time.Duration
	// GroupsEvery is how often the relay reads UpstreamAdmin's group rules
	// again (default relay.DefaultGroupsEvery).
	GroupsEvery time.Duration
	// Key is the key template (default relay.DefaultKey).
	Key string
	// ID is the relay's node id upstream, each key's stream announcing
	// ID/KEY (default "relay-" and the host name).
	ID string
	// MaxKeys, IdleKey, MaxResources: see relay.Options.
	MaxKeys      int
	IdleKey      time.Duration
	MaxResources int
	// StreamsPerConnection bounds the keys' streams on one upstream
	// connection (default upstream.DefaultStreamsPerConnection).
	StreamsPerConnection int
	// UpstreamCA verifies the upstream's certificate (TLS when set);
	// UpstreamCert and UpstreamKey are the relay's client certificate;
	// UpstreamServerName overrides the name verified.
	UpstreamCA, UpstreamCert, UpstreamKey, UpstreamServerName string
	// MinBackoff and MaxBackoff bound the upstream reconnect waits.
	MinBackoff, MaxBackoff time.Duration
	// Relay, if set, receives the relay once started (tests read its keys).
	Relay func(*relay.Relay)
}

// RunRelay serves xDS as a relay until ctx ends: Pylon's xDS server,
// status, metrics, admin API and CSDS, fed by the upstream streams of a
// relay.Relay instead of a config source.
func RunRelay(ctx context.Context, o Options, ro RelayOptions) error {
	o.defaults()
	log := o.Logger
	if ro.Key == "" {
		ro.Key = relay.DefaultKey
	}
	reg := xdstype.New()
	rl, pub, pool, rules, err := newRelay(o, ro, reg)
	if err != nil {
		return err
	}
	defer pool.Close()
	sec, err := loadSecurity(o)
	if err != nil {
		return err
	}
	if err := checkExposure(o, sec, o.XDSAddr, o.AdminAddr, log); err != nil {
		return err
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	tokens, err := loadTokens(o)
	if err != nil {
		return err
	}
	obs := NewObservability(reg, pub)
	runCtx, endRun := context.WithCancel(context.WithoutCancel(ctx))
	defer endRun()
	if rules != nil {
		_ = rules.Read(runCtx) // before serving; a failure is logged, and Run reads again
	}
	if err := rl.Start(runCtx); err != nil {
		return err
	}
	defer rl.Close() // on a failed start too: the keys' streams have begun
	if ro.Relay != nil {
		ro.Relay(rl)
	}
	lis, err := listen(o)
	if err != nil {
		return err
	}
	xdsSrv, gs := newRelayXDS(o, sec, reg, pub, obs, rl, tokens)
	reportExpiry(obs.Metrics, sec, xdsSrv)
	obs.Metrics.Relay(func() metrics.RelayStats {
		s := rl.Stats()
		return metrics.RelayStats{Keys: s.Keys, Connected: s.Connected, HeldBack: s.HeldBack, UpstreamStreams: s.UpstreamStreams, NACKsReported: s.NACKsReported}
	})
	stop := &stopper{
		period: o.DrainPeriod, grace: o.ShutdownGrace, log: log, gs: gs, xds: xdsSrv, lis: lis.xds,
		now: StopNow(ctx), streams: func() int { return openStreams(obs.Tracker) },
	}
	adminOpts := admin.Options{
		Tokens: tokens, TokenFile: o.TokenFile, ReadTokenFile: o.ReadTokenFile,
		Pipeline: relayStatus{rl}, Proxies: obs.Tracker, Fleets: pub, Registry: reg,
		Metrics: obs.Metrics.Registry, Registerer: obs.Metrics.Registry, Draining: stop.Draining,
		Identifier: o.Identifier, Version: o.Version, Logger: log,
		ConfigPath: "relay of " + strings.Join(ro.Upstreams, ", "),
	}
	stop.http = newAdminServer(admin.Handler(adminOpts), o.AdminLimits, sec.adminTLS, log)

	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return rl.Run(gctx) })
	runUpstreamAdmin(gctx, g, rules, rl, obs.Tracker, ro, log)
	g.Go(func() error { return stop.serveXDS(xdsSrv.Listener(lis.xds)) })
	watchCerts(gctx, g, o, sec, xdsSrv)
	g.Go(func() error { return serveAdmin(stop.http, lis.admin, o.AdminLimits) })
	g.Go(func() error {
		stop.run(ctx, gctx)
		err := stop.shutdown()
		endRun()
		return err
	})
	log.Info("pylon relay serving", "xds", lis.xds.Addr().String(), "admin", lis.admin.Addr().String(),
		"upstreams", strings.Join(ro.Upstreams, ","), "key", ro.Key, "xds_tls", sec.xdsTLS != nil)
	if o.OnReady != nil {
		o.OnReady(lis.xds.Addr().String(), lis.admin.Addr().String())
	}
	return g.Wait()
}

// newRelayXDS is the relay's xDS server, as serve's (newXDS) but for the
// relay's admission of each stream into its key (relay.Admit, once the
// server accepted the stream's node: identity, bounds, admission) and its
// observing the streams' NACKs: CSDS on the same gRPC server.
func newRelayXDS(o Options, sec *security, reg *xdstype.Registry, pub *fleet.Publisher, obs *Observability, rl *relay.Relay, tokens *token.Files) (*xds.Server, *grpc.Server) {
	xdsSrv := xds.New(xds.Options{
		Registry: reg, Fleets: pub, Identifier: o.Identifier, Logger: o.Logger,
		SuppressDeltaNotFound: o.SuppressDeltaNotFound, HoldTimeout: o.HoldTimeout,
		MaxInitialSends: o.MaxInitialSends, NewStreamsPerSecond: o.NewStreamsPerSecond,
		Observer: status.ComposeObservers(obs.Observer, rl),
		Identity: sec.identity, InsecureServeSecrets: o.InsecureServeSecrets,
		MaxResourceNames: o.MaxResourceNames, MaxStreamsPerConnection: o.MaxStreamsPerConnection, SendStall: o.SendStall,
		Admit: rl.Admit,
	})
	gs := grpc.NewServer(grpcOptions(o, xdsSrv, sec)...)
	xdsSrv.Register(gs)
	csds.New(csds.Options{
		Tracker: obs.Tracker, Registry: reg, Logger: o.Logger,
		Authorize: csds.TokenOrIdentity(func() string { return tokens.Current().Read }, o.CSDSIdentities),
	}).Register(gs)
	return xdsSrv, gs
}

// newRelay checks the relay's own options and makes the relay, the
// publisher it feeds, the pool of its upstream connections and, with
// --upstream-admin, the reader of the upstream's group rules.
func newRelay(o Options, ro RelayOptions, reg *xdstype.Registry) (*relay.Relay, *fleet.Publisher, *upstream.Pool, *relay.GroupRules, error) {
	if len(ro.Upstreams) == 0 {
		return nil, nil, nil, nil, errors.New("--upstream: name at least one upstream xDS server, HOST:PORT")
	}
	tmpl, err := relay.ParseTemplate(ro.Key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	routes, err := relay.ParseRoutes(ro.UpstreamFor)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tlsCfg, err := upstreamTLS(ro)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	rules, err := groupRules(ro, tlsCfg, o.DataDir, o.Logger)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var creds credentials.TransportCredentials
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	if ro.ID == "" {
		host, _ := os.Hostname()
		ro.ID = "relay-" + host
	}
	pub, pool := fleet.NewPublisher(), upstream.NewPool(creds, 0, ro.StreamsPerConnection)
	rl := relay.New(relay.Options{
		Upstreams: ro.Upstreams, Routes: routes, Pool: pool, Template: tmpl, Groups: rules, ID: ro.ID,
		Registry: reg, Publisher: pub, DataDir: o.DataDir,
		MaxKeys: ro.MaxKeys, IdleKey: ro.IdleKey, MaxResources: ro.MaxResources,
		MinBackoff: ro.MinBackoff, MaxBackoff: ro.MaxBackoff, Logger: o.Logger,
	})
	return rl, pub, pool, rules, nil
}

// upstreamTLS is TLS to the upstream when a CA is given (nil:
// plaintext). The client certificate is read once, at start.
func upstreamTLS(ro RelayOptions) (*tls.Config, error) {
	if ro.UpstreamCA == "" {
		if ro.UpstreamCert != "" || ro.UpstreamKey != "" || ro.UpstreamServerName != "" {
			return nil, errors.New("--upstream-cert, --upstream-key and --upstream-server-name need --upstream-ca: the upstream's certificate must be verified")
		}
		return nil, nil
	}
	pem, err := os.ReadFile(ro.UpstreamCA)
	if err != nil {
		return nil, fmt.Errorf("--upstream-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--upstream-ca %s: no PEM certificate in it", ro.UpstreamCA)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: ro.UpstreamServerName, MinVersion: tls.VersionTLS12}
	if (ro.UpstreamCert == "") != (ro.UpstreamKey == "") {
		return nil, errors.New("--upstream-cert and --upstream-key go together")
	}
	if ro.UpstreamCert != "" {
		cert, err := tls.LoadX509KeyPair(ro.UpstreamCert, ro.UpstreamKey)
		if err != nil {
			// The error names the files, never their content.
			return nil, fmt.Errorf("--upstream-cert, --upstream-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// relayStatus is the relay's fleet as the admin API's config status: a
// group per key; as warnings, the keys a shard refused (misrouted) and
// what the keys' builds held back.
type relayStatus struct{ r *relay.Relay }

func (s relayStatus) Status() pipeline.Status {
	rs := s.r.Status()
	out := pipeline.Status{Version: rs.Version, AcceptedAt: rs.AcceptedAt, PublishedAt: rs.PublishedAt, Groups: []pipeline.GroupStatus{}}
	for _, g := range rs.Groups {
		out.Groups = append(out.Groups, pipeline.GroupStatus{Name: g.Name, Version: g.Version, Resources: g.Resources})
	}
	var warn []string
	for _, k := range s.r.Keys() {
		if k.Refused != "" {
			warn = append(warn, "key "+k.Key+" misrouted (--upstream-for): "+k.Refused)
		}
	}
	for _, h := range rs.HeldBack {
		warn = append(warn, "held back from upstream: "+h)
	}
	out.WarningsTotal = len(warn)
	for _, w := range warn[:min(len(warn), pipeline.MaxWarnings)] {
		out.Warnings = append(out.Warnings, diag.Diagnostic{Message: w})
	}
	return out
}
