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

	"github.com/pylon-xds/pylon/examples"
	"github.com/pylon-xds/pylon/internal/configstore"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// openStore opens the embedded store, seeding a fresh one with the
// quickstart config so that the first run serves something.
func openStore(ctx context.Context, o Options, reg *xdstype.Registry, log *slog.Logger) (store.Store, error) {
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
// one (0600) on first start. The token itself is never logged.
func adminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the token file %s: %w", path, err)
	}
	return t, nil
}
