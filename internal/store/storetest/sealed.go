package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
)

// Marker is in the private key of the Secret the encryption tests write:
// it must not be found in what a store keeps, in clear or as base64.
const Marker = "pylon-at-rest-marker-7f3a"

// SecretKey is the Secret the encryption tests write.
var SecretKey = store.Key{Kind: "secrets", Name: "tls"}

// SecretBody is a stored Secret whose private key holds Marker and n, both
// as PEM text and as base64 inline bytes, as the admin API stores them.
func SecretBody(n string) []byte {
	pem := "-----BEGIN PRIVATE KEY-----\n" + Marker + n + "\n-----END PRIVATE KEY-----\n"
	b, _ := json.Marshal(map[string]any{
		"name": SecretKey.Name,
		"tls_certificate": map[string]any{
			"private_key":       map[string]string{"inline_bytes": base64.StdEncoding.EncodeToString([]byte(pem))},
			"private_key_plain": map[string]string{"inline_string": pem},
		},
	})
	return b
}

// FindMarker returns where raw shows Marker, in clear or in any of the
// three alignments of base64, or "" when nowhere.
func FindMarker(raw []byte) string {
	if bytes.Contains(raw, []byte(Marker)) {
		return "in clear"
	}
	for off := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte("-"), off), Marker...))
		// The characters that depend on the marker alone.
		inner := enc[(off+2)/3*4+4 : len(enc)-4]
		if bytes.Contains(raw, []byte(inner)) {
			return "as base64"
		}
	}
	return ""
}

// NewKeyring returns a keyring of a fresh key.
func NewKeyring(t testing.TB, name string) *seal.Keyring {
	t.Helper()
	return Keyring(t, KeyLines(t, name)[name])
}

// Keyring returns the keyring of key file lines: the tests build
// rotations from lines shared by several keyrings.
func Keyring(t testing.TB, lines ...string) *seal.Keyring {
	t.Helper()
	r, err := seal.Parse([]byte(strings.Join(lines, "\n")), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// SealedBackend is a backend opened with a keyring.
type SealedBackend struct {
	// Open returns the test's store with ring: a fresh one, or (reopen)
	// the same one again, closing the one opened before.
	Open func(t *testing.T, ring *seal.Keyring, reopen bool) store.Store
	// Raw returns every byte the backend keeps of the test's store now
	// (the bbolt file; etcd's keys and values under the prefix).
	Raw func(t *testing.T) []byte
}

// KeyLines makes a key file line of a fresh key for each name.
func KeyLines(t testing.TB, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		b := make([]byte, seal.KeyBytes)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		out[n] = n + ":" + base64.StdEncoding.EncodeToString(b)
	}
	return out
}

// writeSecret commits the Secret twice, each with a history entry, so that
// its first body is a past version the history reads. It returns the
// revision of the first.
func writeSecret(t *testing.T, s store.Store) int64 {
	t.Helper()
	ctx := context.Background()
	first, err := s.Commit(ctx, []store.Change{{Key: SecretKey, Body: SecretBody("1")}}, &store.Entry{Summary: "secret 1"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, []store.Change{{Key: SecretKey, Body: SecretBody("2")}}, &store.Entry{Summary: "secret 2"}, 10); err != nil {
		t.Fatal(err)
	}
	return first
}

// readSecret checks the Secret reads back, now and at first.
func readSecret(t *testing.T, s store.Store, first int64) {
	t.Helper()
	ctx := context.Background()
	o, err := s.Get(ctx, SecretKey)
	if err != nil || !bytes.Equal(o.Body, SecretBody("2")) {
		t.Fatalf("get: %q %v", o.Body, err)
	}
	objs, _, err := s.List(ctx)
	if err != nil || secret(objs) == nil {
		t.Fatalf("list: %d objects without the Secret, %v", len(objs), err)
	}
	e, err := s.At(ctx, first)
	if err != nil || secret(e.Objects) == nil || !bytes.Equal(secret(e.Objects).Body, SecretBody("1")) {
		t.Fatalf("at %d: %+v %v", first, e.Objects, err)
	}
}

// secret is the Secret among objs, nil when it is not there.
func secret(objs []store.Object) *store.Object {
	for i := range objs {
		if objs[i].Key == SecretKey {
			return &objs[i]
		}
	}
	return nil
}

// NoMarkerAtRest: a Secret written twice (its first body a past version
// the history reads) leaves nothing of its private key in what the store
// keeps, in clear or as base64, and reads back whole.
func NoMarkerAtRest(t *testing.T, b SealedBackend) {
	ring := NewKeyring(t, "k1")
	first := writeSecret(t, b.Open(t, ring, false))
	readSecret(t, b.Open(t, ring, true), first)
	raw := b.Raw(t)
	if where := FindMarker(raw); where != "" {
		t.Fatalf("the Secret's private key is kept %s", where)
	}
	if !bytes.Contains(raw, []byte(seal.Prefix+"k1:")) {
		t.Fatal("no sealed value found: Raw reads nothing of the store")
	}
}

// WithoutKeyFails: a sealed store opened without its key fails to read,
// naming the flag and the key.
func WithoutKeyFails(t *testing.T, b SealedBackend) {
	s := b.Open(t, NewKeyring(t, "k1"), false)
	writeSecret(t, s)
	s = b.Open(t, nil, true)
	_, err := s.Get(context.Background(), SecretKey)
	if !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), seal.Flag) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("get without the key: %v", err)
	}
	if _, _, err := s.List(context.Background()); !errors.Is(err, seal.ErrNoKey) {
		t.Fatalf("list without the key: %v", err)
	}
}

// ClearStoreSealed: a store written in clear reads with a key configured
// (migration), and Reseal seals all of it, past versions included, so that
// nothing of the private key is left in what the store keeps.
func ClearStoreSealed(t *testing.T, b SealedBackend) {
	s := b.Open(t, nil, false)
	first := writeSecret(t, s)
	if FindMarker(b.Raw(t)) == "" {
		t.Fatal("the marker is not found in a store written in clear: Raw or FindMarker is wrong")
	}
	s = b.Open(t, NewKeyring(t, "k1"), true)
	readSecret(t, s, first)
	resealAll(t, s, 2)
	if where := FindMarker(b.Raw(t)); where != "" {
		t.Fatalf("after Reseal, the Secret's private key is still kept %s", where)
	}
	readSecret(t, s, first)
}

// resealAll reseals s, expecting at least min values sealed, then none
// on a second call.
func resealAll(t *testing.T, s store.Store, least int) {
	t.Helper()
	r, ok := s.(store.Resealer)
	if !ok {
		t.Fatal("the backend is not a store.Resealer")
	}
	n, err := r.Reseal(context.Background())
	if err != nil || n < least {
		t.Fatalf("reseal: %d values, %v (want at least %d)", n, err, least)
	}
	if n, err := r.Reseal(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second reseal: %d values, %v", n, err)
	}
}

// KeyRotation: values under k1 are read with [k2 k1], sealed again under
// k2 by Reseal (current and past versions), then read with k2 alone.
func KeyRotation(t *testing.T, b SealedBackend) {
	keys := KeyLines(t, "k1", "k2")
	s := b.Open(t, Keyring(t, keys["k1"]), false)
	ctx := context.Background()
	// A registered endpoint: leased, no history entry.
	ep := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := s.Commit(ctx, []store.Change{{Key: ep, Body: []byte(`{"port":80}`), Expires: exp}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	first := writeSecret(t, s)
	s = b.Open(t, Keyring(t, keys["k2"], keys["k1"]), true)
	if o, err := s.Get(ctx, SecretKey); err != nil || !bytes.Equal(o.Body, SecretBody("2")) {
		t.Fatalf("read with [k2 k1]: %v", err)
	}
	resealAll(t, s, 3)
	raw := b.Raw(t)
	if bytes.Contains(raw, []byte(seal.Prefix+"k1:")) || !bytes.Contains(raw, []byte(seal.Prefix+"k2:")) {
		t.Fatal("after Reseal, values are still sealed under k1, or none under k2")
	}
	s = b.Open(t, Keyring(t, keys["k2"]), true)
	if o, err := s.Get(ctx, ep); err != nil || string(o.Body) != `{"port":80}` || !o.Expires.Equal(exp) {
		t.Fatalf("the endpoint after the rotation: %+v %v (want its lease to %v kept)", o, err, exp)
	}
	if _, err := s.Commit(ctx, []store.Change{{Key: ep}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	readSecret(t, s, first)
	// Writes after the rotation are sealed under k2 too.
	if _, err := s.Commit(context.Background(), []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: []byte(`{"name":"web"}`)}}, nil, 10); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Raw(t), []byte(seal.Prefix+"k1:")) {
		t.Fatal("a write after the rotation is sealed under k1")
	}
}
