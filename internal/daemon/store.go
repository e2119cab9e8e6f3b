package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// openStore opens the store (bolt in DataDir, or etcd), seeding a fresh
// one with the quickstart config so that the first run serves something.
func openStore(ctx context.Context, o Options, reg *xdstype.Registry, log *slog.Logger) (store.Store, error) {
	if o.Store == StoreEtcd {
		return openEtcd(ctx, o, reg, log)
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	st, err := bolt.OpenWith(o.DataDir, bolt.Options{Seal: o.ring})
	if err != nil {
		return nil, err
	}
	if err := reseal(ctx, st, o.ring, log); err != nil {
		st.Close()
		return nil, err
	}
	if _, rev, err := st.List(ctx); err != nil || rev > 0 {
		if err != nil {
			st.Close()
		}
		return st, err
	}
	changes, err := configstore.Objects(reg, examples.Quickstart())
	if err == nil {
		svc := configstore.New(configstore.Options{Store: st, Registry: reg, Logger: log})
		_, err = svc.Commit(ctx, changes, "seed: "+examples.QuickstartName, false)
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("seeding the store: %w", err)
	}
	log.Info("new data folder seeded with the quickstart config", "data_dir", o.DataDir)
	return st, nil
}

// loadKeyring reads --encryption-key-file, if given. Only the keys' names
// are logged.
func loadKeyring(o Options, log *slog.Logger) (*seal.Keyring, error) {
	if o.EncryptionKeyFile == "" {
		return nil, nil
	}
	ring, err := seal.Load(o.EncryptionKeyFile)
	if err != nil {
		return nil, err
	}
	log.Info("encryption at rest: stored objects, their history and the rollout state are sealed", "sealing_key", ring.Primary(), "keys", strings.Join(ring.Names(), ","))
	return ring, nil
}

// reseal seals again, under the first key, what the store keeps in clear
// or under another key: at start, so that a new key file applies to what
// is already stored (turning encryption on, or a rotation). With several
// replicas on etcd, each does it as it starts; the values are the same
// for all, so they converge.
func reseal(ctx context.Context, st store.Store, ring *seal.Keyring, log *slog.Logger) error {
	r, ok := st.(store.Resealer)
	if ring == nil || !ok {
		return nil
	}
	n, err := r.Reseal(ctx)
	if err != nil {
		return fmt.Errorf("sealing the stored values under key %q (%s): %w", ring.Primary(), seal.Flag, err)
	}
	if n > 0 {
		log.Info("stored values sealed again under the first key of the key file", "values", n, "sealing_key", ring.Primary())
	}
	return nil
}

// ensureToken writes a token file (the write token, the read token) with
// a fresh token (0600) on first start; an existing file, or anything
// planted at its path, is left to token.LoadFiles, which reads and checks
// it. The token itself is never logged.
func ensureToken(path string) error {
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		return nil // there, or unreadable: LoadFiles says which
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// O_EXCL: never through a link planted at the path, and never over a
	// token another replica starting at the same time just wrote.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the token file %s: %w", path, err)
	}
	_, err = f.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the token file %s: %w", path, err)
	}
	return nil
}
