package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/store"
)

// compactTxBytes bounds one transaction of the copy Reseal makes.
const compactTxBytes = 16 << 20

// Reseal seals again, under the keyring's first key, every body that is
// not sealed under it (current objects and past versions alike): a clear
// body written before a key was configured, or one sealed under an older
// key. It returns how many it sealed. With no keyring it does nothing.
//
// A body sealed again is rewritten in place, in one transaction, without
// a new revision: its content is the same. bbolt reuses the pages it frees
// but never clears them, so the file would keep the clear text or the old
// ciphertext until they are overwritten: when anything was sealed again
// the file is then copied, live data only, and the copy replaces it.
// Call it before the store is used (at start): the copy reopens the file.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if s.ring == nil {
		return 0, nil
	}
	n := 0
	err := s.db.Update(func(tx *bbolt.Tx) error {
		versions := tx.Bucket(versionsBucket)
		return versions.ForEachBucket(func(name []byte) error {
			c, err := s.resealVersions(versions.Bucket(name), parseObjectKey(name))
			n += c
			return err
		})
	})
	if err != nil || n == 0 {
		return n, err
	}
	if err := ctx.Err(); err != nil {
		return n, err
	}
	return n, s.compact()
}

// resealVersions seals again the versions of one object that need it.
// Puts wait until the walk is over: a bucket must not change under its
// cursor.
func (s *Store) resealVersions(b *bbolt.Bucket, k store.Key) (int, error) {
	type put struct{ key, value []byte }
	var puts []put
	err := b.ForEach(func(rk, v []byte) error {
		if val, ok := store.DecodeValue(v); !ok || val.Deleted || s.ring.Current(val.Body) {
			return nil
		}
		o, _, err := decodeVersion(s.ring, k, parseRev(rk), v)
		if err != nil {
			return err
		}
		// The lease as written: o.Expires is it, to the nanosecond.
		puts = append(puts, put{append([]byte(nil), rk...), encodeVersion(s.ring, k, o.Body, o.Expires)})
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, p := range puts {
		if err := b.Put(p.key, p.value); err != nil {
			return 0, err
		}
	}
	return len(puts), nil
}

// compact replaces the file with a copy of its live data: written and
// synced beside it, then renamed over it, so that a crash leaves one or
// the other whole.
func (s *Store) compact() error {
	path := s.db.Path()
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("compacting the store: %w", err)
	}
	dst, err := openDB(tmp, defaultLockWait)
	if err != nil {
		return fmt.Errorf("compacting the store: %w", err)
	}
	err = bbolt.Compact(dst, s.db, compactTxBytes)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("compacting the store: %w", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("compacting the store: %w", err)
	}
	// Whether the rename took or not, the file at path is whole: open it
	// again either way.
	rerr := os.Rename(tmp, path)
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename on disk; best effort where unsupported
		d.Close()
	}
	s.db, err = openDB(path, defaultLockWait)
	if err != nil {
		return fmt.Errorf("reopening the store after compacting it: %w", err)
	}
	if rerr != nil {
		os.Remove(tmp)
		return fmt.Errorf("compacting the store: %w", rerr)
	}
	return nil
}
