package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/storetest"
)

// TestEncryptionAtRest_EtcdHasNoMarker: with a key, no etcd key or value
// under the prefix holds anything of a Secret's private key, current or
// in the history; a store written in clear holds nothing of it (at the
// current revision: etcd's MVCC history keeps the old values until it is
// compacted) once Reseal has run; without the key a sealed store fails
// naming the flag.
func TestEncryptionAtRest_EtcdHasNoMarker(t *testing.T) {
	ms := startCluster(t, 1)
	t.Run("sealed", func(t *testing.T) { storetest.NoMarkerAtRest(t, newBackend(ms, nil).sealed()) })
	t.Run("clear_then_resealed", func(t *testing.T) { storetest.ClearStoreSealed(t, newBackend(ms, nil).sealed()) })
	t.Run("without_the_key", func(t *testing.T) { storetest.WithoutKeyFails(t, newBackend(ms, nil).sealed()) })
}

// TestEncryptionKeyRotation: a new first key, the old one second: what is
// stored under the old one reads, is sealed again under the new one
// (objects and past versions), and then reads with the new key alone.
func TestEncryptionKeyRotation(t *testing.T) {
	storetest.KeyRotation(t, newBackend(startCluster(t, 1), nil).sealed())
}

// TestEncryptionAtRest_Tampered: a flipped byte in a sealed value, or a
// sealed value moved to another object's key, fails to read with an
// error naming the object; a replica with the key reads what another
// sealed.
func TestEncryptionAtRest_Tampered(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	ring := storetest.NewKeyring(t, "k1")
	s, err := Open(ctx, Options{Endpoints: endpoints(ms), Prefix: "/tamper", Seal: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := store.Key{Kind: "secrets", Name: "other"}
	if _, err := s.Commit(ctx, []store.Change{{Key: storetest.SecretKey, Body: storetest.SecretBody("1")}, {Key: other, Body: []byte(`{}`)}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	peer, err := Open(ctx, Options{Endpoints: endpoints(ms), Prefix: "/tamper", Seal: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if o, err := peer.Get(ctx, storetest.SecretKey); err != nil || string(o.Body) != string(storetest.SecretBody("1")) {
		t.Fatalf("another replica with the key: %v", err)
	}
	resp, err := s.cli.Get(ctx, s.objectKey(storetest.SecretKey))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	v := resp.Kvs[0].Value
	if _, err := s.cli.Put(ctx, s.objectKey(other), string(v)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, other); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), "secrets/other") {
		t.Errorf("a sealed value moved to another object: %v", err)
	}
	bad := []byte(string(v))
	bad[len(bad)-20] ^= 1
	if _, err := s.cli.Put(ctx, s.objectKey(storetest.SecretKey), string(bad)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, storetest.SecretKey); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), "secrets/tls") {
		t.Errorf("a flipped byte: %v", err)
	}
	if _, _, err := s.List(ctx); !errors.Is(err, seal.ErrDamaged) {
		t.Errorf("list with a flipped byte: %v", err)
	}
}

func storetestRing(t *testing.T) *seal.Keyring { return storetest.NewKeyring(t, "k1") }
