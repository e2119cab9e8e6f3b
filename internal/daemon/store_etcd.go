package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// Store backends.
const (
	StoreBolt = "bolt"
	StoreEtcd = "etcd"
)

// EtcdOptions configure the etcd store (Options.Store "etcd").
type EtcdOptions struct {
	// Endpoints are etcd's client addresses (required).
	Endpoints []string
	// Prefix is where this fleet's keys live (default etcd.DefaultPrefix).
	Prefix string
	// Cert and Key authenticate this replica to etcd (both or neither);
	// CA verifies etcd's servers. Any of them turns TLS on.
	Cert, Key, CA string
	// StartTimeout bounds how long start-up waits for etcd (default 30s).
	StartTimeout time.Duration
	// Timeout bounds each call to etcd (default etcd.DefaultTimeout).
	Timeout time.Duration
	// Probe is how often the store is checked while idle and read again
	// while away (default 1s; see configstore.Options.Probe).
	Probe time.Duration
}

// maxEtcdEndpoints bounds --etcd-endpoints: an etcd cluster has a handful
// of members, and each endpoint is a connection attempt.
const maxEtcdEndpoints = 16

// maxEtcdWait bounds --etcd-timeout and --etcd-probe: beyond it a replica
// would take minutes to notice etcd gone or back, and a refused write would
// hold its client as long.
const maxEtcdWait = time.Minute

// checkStore refuses a store selection that cannot work, before anything
// is opened: an unknown backend, etcd without endpoints, etcd flags that
// would be silently ignored, half a client key pair.
func checkStore(o Options) error {
	e := o.Etcd
	etcdSet := len(e.Endpoints) > 0 || e.Cert != "" || e.Key != "" || e.CA != "" || e.Prefix != "" ||
		e.Timeout != 0 || e.Probe != 0
	switch o.Store {
	case "", StoreBolt:
		if etcdSet {
			return errors.New("--etcd-* flags are only used with --store etcd")
		}
		return nil
	case StoreEtcd:
	default:
		return fmt.Errorf("--store %q: must be bolt or etcd", o.Store)
	}
	if o.ConfigPath != "" {
		return errors.New("--store etcd keeps the config in etcd: it does not go with --config (file mode)")
	}
	if len(e.Endpoints) == 0 {
		return errors.New("--store etcd needs --etcd-endpoints (host:port of each etcd member, comma separated)")
	}
	if len(e.Endpoints) > maxEtcdEndpoints {
		return fmt.Errorf("--etcd-endpoints: %d endpoints, at most %d", len(e.Endpoints), maxEtcdEndpoints)
	}
	for _, ep := range e.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return errors.New("--etcd-endpoints: an empty endpoint")
		}
	}
	if e.Timeout < 0 || e.Probe < 0 || e.Timeout > maxEtcdWait || e.Probe > maxEtcdWait {
		return fmt.Errorf("--etcd-timeout and --etcd-probe: between 0 (the default) and %v", maxEtcdWait)
	}
	if (e.Cert == "") != (e.Key == "") {
		return errors.New("--etcd-cert and --etcd-key go together: give both or neither")
	}
	return nil
}

// openEtcd connects to etcd, waiting for it within StartTimeout: replicas
// and etcd often start together, and a replica that gave up at once would
// only be restarted by its supervisor. Then it seeds a store never used.
func openEtcd(ctx context.Context, o Options, reg *xdstype.Registry, log *slog.Logger) (store.Store, error) {
	e := o.Etcd
	opts := etcd.Options{Endpoints: e.Endpoints, Prefix: e.Prefix, Timeout: e.Timeout, Seal: o.ring}
	if e.Cert != "" || e.Key != "" || e.CA != "" {
		cfg, err := etcd.ClientTLS(e.Cert, e.Key, e.CA)
		if err != nil {
			return nil, err
		}
		opts.TLS = cfg
	}
	st, err := dialEtcd(ctx, opts, e.StartTimeout, log)
	if err != nil {
		return nil, err
	}
	if err := reseal(ctx, st, o.ring, log); err != nil {
		st.Close()
		return nil, err
	}
	if err := seedEtcd(ctx, st, reg, log); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// dialEtcd opens the store, retrying with backoff while etcd is
// unreachable, for at most wait. Any other error (a prefix holding
// something else, bad TLS files) fails at once.
func dialEtcd(ctx context.Context, opts etcd.Options, wait time.Duration, log *slog.Logger) (*etcd.Store, error) {
	if wait <= 0 {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	backoff := 250 * time.Millisecond
	const maxBackoff = 5 * time.Second
	// Bounded by ctx; the count is a second bound should a call return
	// at once forever.
	for attempt := 1; attempt <= 1000; attempt++ {
		st, err := etcd.Open(ctx, opts)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		log.Warn("etcd unreachable at start: retrying", "endpoints", strings.Join(opts.Endpoints, ","), "attempt", attempt, "retry_in", backoff.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd at %s unreachable for %v at start (%d attempts; last: %w): check --etcd-endpoints, the network and the TLS flags",
				strings.Join(opts.Endpoints, ","), wait, attempt, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
	return nil, errors.New("etcd: gave up connecting")
}

// seedEtcd seeds a store never used (no object and no history) with the
// quickstart config. Every seeded object must not exist yet (revision -1),
// so when replicas start together only one seed lands; the others get a
// conflict, which means the store is seeded.
func seedEtcd(ctx context.Context, st store.Store, reg *xdstype.Registry, log *slog.Logger) error {
	objs, _, err := st.List(ctx)
	if err != nil || len(objs) > 0 {
		return err
	}
	hist, err := st.History(ctx)
	if err != nil || len(hist) > 0 {
		return err
	}
	changes, err := configstore.Objects(reg, examples.Quickstart())
	if err != nil {
		return fmt.Errorf("seeding the store: %w", err)
	}
	for i := range changes {
		changes[i].Revision = -1
	}
	svc := configstore.New(configstore.Options{Store: st, Registry: reg, Logger: log})
	_, err = svc.Commit(ctx, changes, "seed: "+examples.QuickstartName, false)
	switch {
	case errors.Is(err, store.ErrConflict):
		log.Info("the etcd store was seeded by another replica meanwhile")
		return nil
	case err != nil:
		return fmt.Errorf("seeding the store: %w", err)
	}
	log.Info("new etcd store seeded with the quickstart config")
	return nil
}
