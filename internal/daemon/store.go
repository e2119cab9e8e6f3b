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
	"syscall"

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/token"
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
	st, err := bolt.Open(o.DataDir)
	if err != nil {
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

// adminToken reads a token (the write token, the read token), generating
// one (0600) on first start. The token itself is never logged. A token
// file others can read is refused: anyone on the host could use it.
func adminToken(path string) (string, error) {
	t, err := token.ReadFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return t, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	t = hex.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	// O_EXCL: never through a link planted at the path, and never over a
	// token another replica starting at the same time just wrote.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return token.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("writing the token file %s: %w", path, err)
	}
	_, err = f.WriteString(t + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing the token file %s: %w", path, err)
	}
	return t, nil
}
