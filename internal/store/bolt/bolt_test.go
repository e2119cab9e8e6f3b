package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/storetest"
)

// TestConformance runs the shared suite on stores in clear and sealed
// (encryption at rest).
func TestConformance(t *testing.T) {
	t.Run("clear", func(t *testing.T) { storetest.Run(t, newBackend(nil).reopen) })
	t.Run("sealed", func(t *testing.T) { storetest.Run(t, newBackend(storetest.NewKeyring(t, "k1")).reopen) })
}

// backend opens one store per test, in its own folder, again on reopen.
type backend struct {
	ring   *seal.Keyring
	dirs   map[string]string
	opened map[string]*Store
}

func newBackend(ring *seal.Keyring) *backend {
	return &backend{ring: ring, dirs: map[string]string{}, opened: map[string]*Store{}}
}

func (b *backend) reopen(t *testing.T, reopen bool) store.Store { return b.open(t, b.ring, reopen) }

func (b *backend) open(t *testing.T, ring *seal.Keyring, reopen bool) store.Store {
	t.Helper()
	dir, ok := b.dirs[t.Name()]
	if !reopen || !ok {
		dir = t.TempDir()
		b.dirs[t.Name()] = dir
	} else if s := b.opened[t.Name()]; s != nil {
		s.Close()
	}
	s, err := OpenWith(dir, Options{Seal: ring})
	if err != nil {
		t.Fatal(err)
	}
	b.opened[t.Name()] = s
	t.Cleanup(func() { s.Close() })
	return s
}

// raw is the bbolt file's bytes, as a copy of the disk would show them.
func (b *backend) raw(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.dirs[t.Name()], "pylon.db"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func (b *backend) sealed() storetest.SealedBackend {
	return storetest.SealedBackend{Open: b.open, Raw: b.raw}
}

// writeFormat1 builds a data folder as the format 1 store wrote it: each
// object's JSON record with its body, each history entry with a copy of
// every object, no format key.
func writeFormat1(t *testing.T, dir string, objs []store.Object, entries []store.Entry, rev int64) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dir, "pylon.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		o, _ := tx.CreateBucket(objectsBucket)
		h, _ := tx.CreateBucket(historyBucket)
		m, _ := tx.CreateBucket(metaBucket)
		for _, obj := range objs {
			v, _ := json.Marshal(obj)
			if err := o.Put(objectKey(obj.Key), v); err != nil {
				return err
			}
		}
		for _, e := range entries {
			v, _ := json.Marshal(e)
			if err := h.Put(revKey(e.Revision), v); err != nil {
				return err
			}
		}
		return m.Put(revisionKey, revKey(rev))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigratesFormat1 opens an old data folder: the current objects,
// every entry's full config, and new commits all work, and the file says
// it is format 2.
func TestMigratesFormat1(t *testing.T) {
	ctx := context.Background()
	web := store.Key{Kind: "services", Name: "web"}
	api := store.Key{Kind: "services", Name: "api"}
	ep := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	lease := time.Unix(1700000000, 0)
	// rev 1: web v1; rev 2: web v1 + api; rev 3: api deleted, web v3;
	// rev 4 (runtime, no entry): an endpoint. Now: web v3, endpoint.
	w1 := store.Object{Key: web, Body: []byte(`{"v":1}`), Revision: 1}
	a2 := store.Object{Key: api, Body: []byte(`{"a":2}`), Revision: 2}
	w3 := store.Object{Key: web, Body: []byte(`{"v":3}`), Revision: 3}
	e4 := store.Object{Key: ep, Body: []byte(`{"address":"10.0.0.1"}`), Revision: 4, Expires: lease}
	entries := []store.Entry{
		{Revision: 1, Summary: "one", Version: "v1", Objects: []store.Object{w1}},
		{Revision: 2, Summary: "two", Version: "v2", Objects: []store.Object{w1, a2}},
		{Revision: 3, Summary: "three", Version: "v3", Objects: []store.Object{w3}},
	}
	dir := t.TempDir()
	writeFormat1(t, dir, []store.Object{w3, e4}, entries, 4)

	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, rev, err := s.List(ctx)
	if err != nil || rev != 4 || storetestState(objs) != storetestState([]store.Object{w3, e4}) {
		t.Fatalf("list after migration: %v at %d: %v", objs, rev, err)
	}
	if o, err := s.Get(ctx, ep); err != nil || !o.Expires.Equal(lease) {
		t.Fatalf("the lease: %+v %v", o, err)
	}
	for _, want := range entries {
		e, err := s.At(ctx, want.Revision)
		if err != nil || e.Summary != want.Summary || storetestState(e.Objects) != storetestState(want.Objects) {
			t.Fatalf("at %d: %+v %v, want %+v", want.Revision, e, err, want)
		}
	}
	if _, err := s.Commit(ctx, []store.Change{{Key: web, Body: []byte(`{"v":5}`), Revision: 3}}, &store.Entry{Summary: "five"}, 2); err != nil {
		t.Fatalf("a commit after migration: %v", err)
	}
	if e, err := s.At(ctx, 3); err != nil || storetestState(e.Objects) != storetestState([]store.Object{w3}) {
		t.Fatalf("at 3 after a new commit: %+v %v", e, err)
	}
	s.Close()
	// Opened again, nothing is migrated twice.
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h, err := s.History(ctx); err != nil || len(h) != 2 || h[0].Summary != "five" {
		t.Fatalf("history after reopening: %+v %v", h, err)
	}
	_ = s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(metaBucket).Get(formatKey); v == nil || parseRev(v) != format {
			t.Errorf("format key: %v", v)
		}
		return nil
	})
}

func storetestState(objs []store.Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, fmt.Sprintf("%s/%s@%d=%s", o.Kind, o.Name, o.Revision, o.Body))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// TestPruningDropsVersions: after many commits with a short history, the
// versions left are those the current objects and kept entries read, and
// a runtime write's replaced version does not wait for pruning.
func TestPruningDropsVersions(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const keep = 3
	for i := range 50 {
		k := store.Key{Kind: "services", Name: fmt.Sprint("s", i%4)}
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, `%d`, i)}}, &store.Entry{}, keep); err != nil {
			t.Fatal(err)
		}
	}
	ep := store.Key{Kind: "endpoints.web", Name: "a:1"}
	for i := range 50 {
		if _, err := s.Commit(ctx, []store.Change{{Key: ep, Body: fmt.Appendf(nil, `%d`, i)}}, nil, keep); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	_ = s.db.View(func(tx *bbolt.Tx) error {
		vs := tx.Bucket(versionsBucket)
		return vs.ForEachBucket(func(name []byte) error {
			return vs.Bucket(name).ForEach(func(_, _ []byte) error { n++; return nil })
		})
	})
	// 4 services (current), at most one older version per kept entry,
	// and the endpoint's one current version.
	if n > 4+keep+1 {
		t.Fatalf("%d versions kept for 5 objects and %d entries", n, keep)
	}
}
