// Package daemon is the composition root of `pylon serve`: it wires the
// config source, the pipeline, the xDS server and the admin API, runs them
// together and stops them gracefully.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/pylon-xds/pylon/internal/admin"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/source/file"
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
	// DataDir holds the embedded store (default "pylon-data"); a fresh one
	// is seeded with the quickstart config.
	DataDir string
	// TokenFile holds the admin API's write token (default
	// DataDir/admin-token, generated on first start).
	TokenFile string
	// HistoryLimit bounds the stored config history (default 100).
	HistoryLimit int
	XDSAddr      string // default ":18000"
	AdminAddr    string // default "127.0.0.1:19000"
	// DebounceQuiet and DebounceMax batch bursts of file events
	// (defaults 100ms and 1s).
	DebounceQuiet time.Duration
	DebounceMax   time.Duration
	// Resync re-reads the config this often (default 30s; negative
	// disables).
	Resync time.Duration
	// ShutdownGrace bounds a graceful stop (default 10s).
	ShutdownGrace time.Duration
	// Identifier names this replica in xDS responses and the admin API.
	Identifier string
	// SuppressDeltaNotFound, HoldTimeout, MaxInitialSends and
	// NewStreamsPerSecond: see xds.Options.
	SuppressDeltaNotFound bool
	HoldTimeout           time.Duration
	MaxInitialSends       int
	NewStreamsPerSecond   float64
	// MaxConnectionAge, when set, closes client connections after that
	// long (plus MaxConnectionAgeGrace for open streams), so that load
	// rebalances across replicas. Off by default: one replica gains nothing.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	Version               string
	Logger                *slog.Logger
	// OnReady, if set, is called with the bound addresses once both
	// listeners are open and the first config is published.
	OnReady func(xdsAddr, adminAddr string)
}

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
}

// Run serves until ctx ends, then stops gracefully and returns nil; it
// returns an error if the initial config is refused or a component fails.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	log := o.Logger
	reg := xdstype.New()
	pub := snapshot.NewPublisher()
	pipe := pipeline.New(reg, pub, log)
	obs := NewObservability(reg, pub)
	tracker, met := obs.Tracker, obs.Metrics
	pipe.OnResult(func(result string, f *snapshot.Fleet) {
		met.Publish(result)
		if f != nil {
			obs.Published(f)
		}
	})

	// The first config is loaded before anything listens: with no last good
	// config to fall back on, a bad one is a startup error, not a silent
	// empty fleet.
	var cfgSvc *configstore.Service
	var token string
	initial := source.Update{AcceptedAt: time.Now()}
	if o.ConfigPath == "" {
		st, err := openStore(ctx, o, reg, log)
		if err != nil {
			return err
		}
		defer st.Close()
		cfgSvc = configstore.New(configstore.Options{Store: st, Registry: reg, Keep: o.HistoryLimit, Debounce: o.DebounceQuiet, Logger: log})
		if token, err = adminToken(o.TokenFile); err != nil {
			return err
		}
		initial.Files, initial.Err = cfgSvc.Current(ctx)
		log.Info("serving the config kept in the embedded store; change it with the admin API (pylon apply, pylon endpoints ...)", "data_dir", o.DataDir)
	} else {
		initial.Files, initial.Err = file.Read(o.ConfigPath)
	}
	if err := pipe.Apply(initial); err != nil {
		return fmt.Errorf("initial config refused: %w", err)
	}

	xdsLis, err := net.Listen("tcp", o.XDSAddr)
	if err != nil {
		return fmt.Errorf("xds listener: %w", err)
	}
	adminLis, err := net.Listen("tcp", o.AdminAddr)
	if err != nil {
		xdsLis.Close()
		return fmt.Errorf("admin listener: %w", err)
	}

	xdsSrv := xds.New(xds.Options{
		Registry: reg, Fleets: pub, Identifier: o.Identifier, Logger: log,
		SuppressDeltaNotFound: o.SuppressDeltaNotFound, HoldTimeout: o.HoldTimeout,
		MaxInitialSends: o.MaxInitialSends, NewStreamsPerSecond: o.NewStreamsPerSecond,
		Observer: obs.Observer,
	})
	gs := grpc.NewServer(append(xds.ServerOptions(),
		// Envoy's bootstrap pings every 30s; allow that and detect clients
		// that vanished without closing their connection.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: 30 * time.Second, Timeout: 10 * time.Second,
			MaxConnectionAge: o.MaxConnectionAge, MaxConnectionAgeGrace: o.MaxConnectionAgeGrace,
		}),
	)...)
	xdsSrv.Register(gs)
	httpSrv := &http.Server{
		Handler:           admin.Handler(admin.Options{Pipeline: pipe, Proxies: tracker, Fleets: pub, Registry: reg, Metrics: met.Registry, Config: cfgSvc, Token: token, Identifier: o.Identifier, Version: o.Version}),
		ReadHeaderTimeout: 10 * time.Second,
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// A shutdown that comes before Serve starts makes it return
		// ErrServerStopped: a clean stop like any other.
		if err := gs.Serve(xdsLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("xds server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := httpSrv.Serve(adminLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("admin server: %w", err)
		}
		return nil
	})
	if cfgSvc != nil {
		updates := make(chan source.Update)
		g.Go(func() error { return cfgSvc.Run(gctx, updates) })
		g.Go(func() error { return pipe.Run(gctx, updates) })
	}
	if o.ConfigPath != "" {
		updates := make(chan source.Update)
		resync := o.Resync
		if resync < 0 {
			resync = 0
		}
		watcher := file.New(file.Options{
			Path: o.ConfigPath, Quiet: o.DebounceQuiet, MaxWait: o.DebounceMax, Resync: resync, Logger: log,
			OnEvent: met.SourceEvent, OnRead: met.Reload,
		})
		// Certificates the config names are watched too: a rotation
		// reloads, and only the changed Secret is pushed.
		pipe.OnFiles(watcher.Watch)
		g.Go(func() error { return watcher.Run(gctx, updates) })
		g.Go(func() error { return pipe.Run(gctx, updates) })
	}
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down")
		stopped := make(chan struct{})
		go func() {
			// GOAWAY to clients and no new streams; returns once the
			// streams below have ended.
			gs.GracefulStop()
			close(stopped)
		}()
		xdsSrv.Shutdown()
		timer := time.NewTimer(o.ShutdownGrace)
		defer timer.Stop()
		select {
		case <-stopped:
		case <-timer.C:
			gs.Stop()
			<-stopped
		}
		shutCtx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace)
		defer cancel()
		return httpSrv.Shutdown(shutCtx)
	})

	log.Info("pylon serving", "xds", xdsLis.Addr().String(), "admin", adminLis.Addr().String(), "version", pipe.Status().Version)
	if o.OnReady != nil {
		o.OnReady(xdsLis.Addr().String(), adminLis.Addr().String())
	}
	return g.Wait()
}
