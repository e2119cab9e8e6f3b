// Package bolt is the embedded store: one bbolt file in the data folder.
// Every commit is one bbolt transaction, fsynced before it returns, so an
// acknowledged write survives a crash and a crash never leaves the file
// half-written.
package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/store"
)

var (
	objectsBucket = []byte("objects")
	historyBucket = []byte("history")
	metaBucket    = []byte("meta")
	revisionKey   = []byte("revision")
)

// Store is a store.Store on bbolt.
type Store struct{ db *bbolt.DB }

// Open opens (creating) the store in dir.
func Open(dir string) (*Store, error) {
	db, err := bbolt.Open(filepath.Join(dir, "pylon.db"), 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening the store in %s: %w", dir, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{objectsBucket, historyBucket, metaBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func objectKey(k store.Key) []byte { return []byte(k.Kind + "\x00" + k.Name) }

func revKey(rev int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(rev))
	return b
}

func revision(tx *bbolt.Tx) int64 {
	v := tx.Bucket(metaBucket).Get(revisionKey)
	if v == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// List returns every object and the current revision.
func (s *Store) List(ctx context.Context) ([]store.Object, int64, error) {
	var out []store.Object
	var rev int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		rev = revision(tx)
		return tx.Bucket(objectsBucket).ForEach(func(_, v []byte) error {
			var o store.Object
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			out = append(out, o)
			return nil
		})
	})
	return out, rev, err
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Object, error) {
	var o store.Object
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(objectsBucket).Get(objectKey(k))
		if v == nil {
			return store.ErrNotFound
		}
		return json.Unmarshal(v, &o)
	})
	return o, err
}

// Commit applies changes at a new revision and records entry.
func (s *Store) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	var rev int64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		objs := tx.Bucket(objectsBucket)
		rev = revision(tx) + 1
		for _, c := range changes {
			cur := objs.Get(objectKey(c.Key))
			if c.Revision != 0 {
				var o store.Object
				if cur != nil {
					if err := json.Unmarshal(cur, &o); err != nil {
						return err
					}
				}
				if (c.Revision == -1 && cur != nil) || (c.Revision > 0 && (cur == nil || o.Revision != c.Revision)) {
					return fmt.Errorf("%w: %s/%s", store.ErrConflict, c.Kind, c.Name)
				}
			}
			if c.Body == nil {
				if err := objs.Delete(objectKey(c.Key)); err != nil {
					return err
				}
				continue
			}
			v, err := json.Marshal(store.Object{Key: c.Key, Body: c.Body, Revision: rev, Expires: c.Expires})
			if err != nil {
				return err
			}
			if err := objs.Put(objectKey(c.Key), v); err != nil {
				return err
			}
		}
		if err := tx.Bucket(metaBucket).Put(revisionKey, revKey(rev)); err != nil {
			return err
		}
		if entry == nil {
			return nil
		}
		// The history keeps the whole object set, so a rollback needs
		// nothing else.
		entry.Revision = rev
		entry.Objects = nil
		if err := objs.ForEach(func(_, v []byte) error {
			var o store.Object
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			entry.Objects = append(entry.Objects, o)
			return nil
		}); err != nil {
			return err
		}
		v, err := json.Marshal(entry)
		if err != nil {
			return err
		}
		hist := tx.Bucket(historyBucket)
		if err := hist.Put(revKey(rev), v); err != nil {
			return err
		}
		if keep <= 0 {
			return nil
		}
		var keys [][]byte
		c := hist.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for i := 0; i < len(keys)-keep; i++ {
			if err := hist.Delete(keys[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return rev, err
}

// Touch renews a lease in place.
func (s *Store) Touch(ctx context.Context, k store.Key, expires time.Time) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		objs := tx.Bucket(objectsBucket)
		v := objs.Get(objectKey(k))
		if v == nil {
			return store.ErrNotFound
		}
		var o store.Object
		if err := json.Unmarshal(v, &o); err != nil {
			return err
		}
		o.Expires = expires
		nv, err := json.Marshal(o)
		if err != nil {
			return err
		}
		return objs.Put(objectKey(k), nv)
	})
}

// History returns the entries, newest first, without objects.
func (s *Store) History(ctx context.Context) ([]store.Entry, error) {
	var out []store.Entry
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(historyBucket).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var e store.Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			e.Objects = nil
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// At returns one history entry with its objects.
func (s *Store) At(ctx context.Context, rev int64) (store.Entry, error) {
	var e store.Entry
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(historyBucket).Get(revKey(rev))
		if v == nil {
			return fmt.Errorf("revision %d: %w (the history keeps the latest revisions only)", rev, store.ErrNotFound)
		}
		return json.Unmarshal(v, &e)
	})
	return e, err
}

var _ store.Store = (*Store)(nil)
