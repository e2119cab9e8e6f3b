package bolt

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/storetest"
)

// TestEncryptionAtRest_BoltFileHasNoMarker: with a key, the bbolt file
// holds nothing of a Secret's private key, current or in the history; a
// file written in clear holds nothing of it once Reseal has run (the file
// is compacted: bbolt does not clear the pages it frees); without the key
// a sealed file fails naming the flag.
func TestEncryptionAtRest_BoltFileHasNoMarker(t *testing.T) {
	t.Run("sealed", func(t *testing.T) { storetest.NoMarkerAtRest(t, newBackend(nil).sealed()) })
	t.Run("clear_then_resealed", func(t *testing.T) { storetest.ClearStoreSealed(t, newBackend(nil).sealed()) })
	t.Run("without_the_key", func(t *testing.T) { storetest.WithoutKeyFails(t, newBackend(nil).sealed()) })
}

// TestEncryptionKeyRotation: a new first key, the old one second: what is
// stored under the old one reads, is sealed again under the new one, and
// then reads with the new key alone.
func TestEncryptionKeyRotation(t *testing.T) {
	storetest.KeyRotation(t, newBackend(nil).sealed())
}

// TestEncryptionAtRest_Tampered: a flipped byte in a sealed body, or a
// sealed body moved to another object, fails to read with an error naming
// the object.
func TestEncryptionAtRest_Tampered(t *testing.T) {
	ctx := context.Background()
	b := newBackend(storetest.NewKeyring(t, "k1"))
	s := b.reopen(t, false).(*Store)
	other := store.Key{Kind: "secrets", Name: "other"}
	if _, err := s.Commit(ctx, []store.Change{{Key: storetest.SecretKey, Body: storetest.SecretBody("1")}, {Key: other, Body: []byte(`{}`)}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	rewrite := func(k store.Key, edit func(v []byte) []byte) {
		t.Helper()
		err := s.db.Update(func(tx *bbolt.Tx) error {
			vers := tx.Bucket(versionsBucket)
			from := vers.Bucket(objectKey(storetest.SecretKey))
			rk, v := from.Cursor().Last()
			to := vers.Bucket(objectKey(k))
			tk, _ := to.Cursor().Last()
			if rk == nil || tk == nil {
				return errors.New("no version")
			}
			return to.Put(tk, edit(bytes.Clone(v)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	rewrite(other, func(v []byte) []byte { return v }) // the Secret's body moved to other
	if _, err := s.Get(ctx, other); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), "secrets/other") {
		t.Errorf("a sealed body moved to another object: %v", err)
	}
	rewrite(storetest.SecretKey, func(v []byte) []byte { v[len(v)-20] ^= 1; return v })
	if _, err := s.Get(ctx, storetest.SecretKey); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), "secrets/tls") {
		t.Errorf("a flipped byte: %v", err)
	}
	if _, _, err := s.List(ctx); !errors.Is(err, seal.ErrDamaged) {
		t.Errorf("list with a flipped byte: %v", err)
	}
}
