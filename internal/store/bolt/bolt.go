// Package bolt is the embedded store: one bbolt file in the data folder.
// Every commit is one bbolt transaction, fsynced before it returns, so an
// acknowledged write survives a crash and a crash never leaves the file
// half-written.
//
// Layout (format 2). Each body is stored once, as a version:
//
//	versions/<kind NUL name>/<revision>  a body as written at that revision,
//	                                     or a tombstone for a delete
//	objects/<kind NUL name>              the current object without its
//	                                     body: revision and lease
//	history/<revision>                   an entry without objects
//	meta/revision, meta/format
//
// At(rev) reads, for each object, its latest version at or before rev.
// Each object's versions sit in a bucket of their own, so a write to one
// object never rewrites the pages of another (bbolt rewrites a whole leaf
// when one of its keys changes; a large body sharing a leaf with a busy
// small one was copied on every small write). A version is kept only while
// the current object or a kept history entry needs it. Format 1 files,
// where each entry copied every object, are migrated when opened.
//
// With Options.Seal, every body (current and past versions) is sealed
// (package seal) with the object's kind and name as additional data; the
// records of objects, history entries and meta hold no body and stay
// clear. Clear bodies written before a key was configured are read as
// they are, and sealed by Reseal.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
)

var (
	objectsBucket  = []byte("objects")
	versionsBucket = []byte("versions")
	historyBucket  = []byte("history")
	metaBucket     = []byte("meta")
	revisionKey    = []byte("revision")
	formatKey      = []byte("format")
)

// format is the layout this code writes.
const format = 2

// Store is a store.Store on bbolt.
type Store struct {
	db      *bbolt.DB
	dir     string // the data folder, where the pid file is
	ring    *seal.Keyring
	touches toucher
}

// Options configure a Store.
type Options struct {
	// Seal, when set, seals every body written; without it a sealed
	// body fails to read with an error naming --encryption-key-file.
	Seal *seal.Keyring
	// lockWait is how long Open waits for another process's file lock
	// (0: lockWait's default); tests shorten it.
	lockWait time.Duration
}

// pidFile, beside the database, names the process that holds it.
const pidFile = "pylon.pid"

// defaultLockWait is how long Open waits for the database's file lock.
const defaultLockWait = 5 * time.Second

// Open opens (creating) the store in dir, migrating an older layout.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) {
	wait := o.lockWait
	if wait == 0 {
		wait = defaultLockWait
	}
	path := filepath.Join(dir, "pylon.db")
	db, err := openDB(path, wait)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, held(dir, path, wait)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the store in %s: %w", dir, err)
	}
	if err := db.Update(prepare); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening the store in %s: %w", dir, err)
	}
	// Best effort: the pid file only helps the next opener's error say
	// who holds the store; the store works without it.
	_ = writePID(dir)
	return &Store{db: db, dir: dir, ring: o.Seal}, nil
}

// held is the error of an open that waited in vain for the database's file
// lock: another process has the data folder, most likely a `pylon serve`
// on the same --data-dir. The pid file names it when the holder wrote
// one; fuser and lsof find it otherwise.
func held(dir, path string, waited time.Duration) error {
	who := "a process"
	if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil && len(b) < 32 {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			who = fmt.Sprintf("process %d (per %s; if it is not Pylon, the file is stale)", pid, filepath.Join(dir, pidFile))
		}
	}
	return fmt.Errorf("opening the store in %s: another process holds its database %s (waited %v for the file lock): %s, most likely another `pylon serve` on this data folder; stop it or give this one another --data-dir (`fuser %s` or `lsof %s` names the holder)",
		dir, path, waited, who, path, path)
}

// writePID records this process as the store's holder, written aside and
// renamed so that a reader never sees half a number.
func writePID(dir string) error {
	tmp := filepath.Join(dir, pidFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pidFile))
}

// removePID removes the pid file if it still names this process.
func removePID(dir string) {
	p := filepath.Join(dir, pidFile)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		_ = os.Remove(p)
	}
}

func openDB(path string, wait time.Duration) (*bbolt.DB, error) {
	return bbolt.Open(path, 0o600, &bbolt.Options{Timeout: wait})
}

// prepare creates the buckets of a new file, or migrates an old one.
func prepare(tx *bbolt.Tx) error {
	fresh := tx.Bucket(metaBucket) == nil
	for _, b := range [][]byte{objectsBucket, versionsBucket, historyBucket, metaBucket} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(metaBucket)
	switch v := meta.Get(formatKey); {
	case v == nil && !fresh:
		if err := migrate1(tx); err != nil {
			return fmt.Errorf("migrating the store to format %d: %w", format, err)
		}
	case v != nil && binary.BigEndian.Uint64(v) > format:
		return fmt.Errorf("the store was written by a newer Pylon (format %d; this one reads up to %d)", binary.BigEndian.Uint64(v), format)
	}
	return meta.Put(formatKey, revKey(format))
}

// Close closes the file. The pid file goes first, while the lock is still
// held: the next holder writes its own after.
func (s *Store) Close() error {
	removePID(s.dir)
	return s.db.Close()
}

// Size is the store file's size in bytes.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.db.Path())
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func objectKey(k store.Key) []byte { return []byte(k.Kind + "\x00" + k.Name) }

func parseObjectKey(b []byte) store.Key {
	kind, name, _ := bytes.Cut(b, []byte{0})
	return store.Key{Kind: string(kind), Name: string(name)}
}

func revKey(rev int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(rev))
	return b
}

func parseRev(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

func revision(tx *bbolt.Tx) int64 {
	v := tx.Bucket(metaBucket).Get(revisionKey)
	if v == nil {
		return 0
	}
	return parseRev(v)
}

// latestEntry is the newest history revision, 0 with none.
func latestEntry(tx *bbolt.Tx) int64 {
	k, _ := tx.Bucket(historyBucket).Cursor().Last()
	if k == nil {
		return 0
	}
	return parseRev(k)
}

// meta is an object's record in the objects bucket: everything but the
// body, which is its version at Revision.
type meta struct {
	Revision int64     `json:"revision"`
	Expires  time.Time `json:"expires,omitzero"`
}

// encodeVersion encodes a version (store.EncodeValue), its body sealed
// when ring is set.
func encodeVersion(ring *seal.Keyring, k store.Key, body []byte, expires time.Time) []byte {
	return store.EncodeValue(ring.Seal(store.SealContext(k), body), expires)
}

// decodeVersion returns a version's object, its body opened with ring;
// ok false for a tombstone.
func decodeVersion(ring *seal.Keyring, k store.Key, rev int64, v []byte) (o store.Object, ok bool, err error) {
	val, ok := store.DecodeValue(v)
	if !ok {
		return o, false, fmt.Errorf("%s/%s at revision %d: a damaged version record", k.Kind, k.Name, rev)
	}
	if val.Deleted {
		return o, false, nil
	}
	b, err := ring.Open(store.SealContext(k), val.Body)
	if err != nil {
		return o, false, fmt.Errorf("the store, revision %d: %w", rev, err)
	}
	return store.Object{Key: k, Revision: rev, Body: append([]byte(nil), b...), Expires: val.Expires}, true, nil
}

// current reads an object's record; ok false when it does not exist.
func current(tx *bbolt.Tx, k store.Key) (m meta, ok bool, err error) {
	v := tx.Bucket(objectsBucket).Get(objectKey(k))
	if v == nil {
		return m, false, nil
	}
	return m, true, json.Unmarshal(v, &m)
}

// body reads an object's body from its version.
func (s *Store) body(tx *bbolt.Tx, k store.Key, m meta) (store.Object, error) {
	var vb []byte
	if b := tx.Bucket(versionsBucket).Bucket(objectKey(k)); b != nil {
		vb = b.Get(revKey(m.Revision))
	}
	if vb == nil {
		return store.Object{}, fmt.Errorf("%s/%s: the version of revision %d is missing", k.Kind, k.Name, m.Revision)
	}
	o, _, err := decodeVersion(s.ring, k, m.Revision, vb)
	o.Expires = m.Expires
	return o, err
}

// List returns every object and the current revision.
func (s *Store) List(ctx context.Context) ([]store.Object, int64, error) {
	var out []store.Object
	var rev int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		rev = revision(tx)
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var m meta
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			o, err := s.body(tx, parseObjectKey(k), m)
			out = append(out, o)
			return err
		})
	})
	return out, rev, err
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Object, error) {
	var o store.Object
	err := s.db.View(func(tx *bbolt.Tx) error {
		m, ok, err := current(tx, k)
		if err != nil || !ok {
			return errors.Join(err, store.ErrNotFound)
		}
		o, err = s.body(tx, k, m)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return o, store.ErrNotFound
	}
	return o, err
}

// Commit applies changes at a new revision and records entry.
func (s *Store) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	var rev int64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		rev = revision(tx) + 1
		// A version the current object had is still needed when a kept
		// entry was recorded at or after it.
		lastEntry := latestEntry(tx)
		for _, c := range changes {
			if err := apply(tx, s.ring, c, rev, lastEntry); err != nil {
				return err
			}
		}
		if err := tx.Bucket(metaBucket).Put(revisionKey, revKey(rev)); err != nil {
			return err
		}
		if entry == nil {
			return nil
		}
		return record(tx, entry, rev, keep)
	})
	return rev, err
}

// apply makes one change at rev: checks its revision, writes the version
// and the object's record, and drops the version it replaces unless a
// history entry needs it.
func apply(tx *bbolt.Tx, ring *seal.Keyring, c store.Change, rev, lastEntry int64) error {
	cur, exists, err := current(tx, c.Key)
	if err != nil {
		return err
	}
	if c.Revision == -1 && exists || c.Revision > 0 && (!exists || cur.Revision != c.Revision) {
		return fmt.Errorf("%w: %s/%s", store.ErrConflict, c.Kind, c.Name)
	}
	if c.Body == nil && !exists {
		return nil
	}
	ok := objectKey(c.Key)
	vers, err := tx.Bucket(versionsBucket).CreateBucketIfNotExists(ok)
	if err != nil {
		return err
	}
	if exists && cur.Revision > lastEntry {
		if err := vers.Delete(revKey(cur.Revision)); err != nil {
			return err
		}
	}
	if c.Body == nil {
		if err := tx.Bucket(objectsBucket).Delete(ok); err != nil {
			return err
		}
		// Older versions some entry reads need a tombstone after them;
		// with none left the object leaves no trace.
		if k, _ := vers.Cursor().First(); k == nil {
			return tx.Bucket(versionsBucket).DeleteBucket(ok)
		}
		return vers.Put(revKey(rev), store.Tombstone())
	}
	if err := vers.Put(revKey(rev), encodeVersion(ring, c.Key, c.Body, c.Expires)); err != nil {
		return err
	}
	m, err := json.Marshal(meta{Revision: rev, Expires: c.Expires})
	if err != nil {
		return err
	}
	return tx.Bucket(objectsBucket).Put(ok, m)
}

// record writes the history entry of rev and prunes the history to keep
// entries, with the versions only the pruned entries needed.
func record(tx *bbolt.Tx, entry *store.Entry, rev int64, keep int) error {
	entry.Revision = rev
	e := *entry
	e.Objects = nil
	v, err := json.Marshal(e)
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
	// The newest keep entries stay; the history is small (keep + 1 at
	// most), so walking it costs nothing. Stats would not see this
	// transaction's own write.
	var keys [][]byte
	c := hist.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	if len(keys) <= keep {
		return nil
	}
	drop := keys[:len(keys)-keep]
	for _, k := range drop {
		if err := hist.Delete(k); err != nil {
			return err
		}
	}
	oldest, _ := hist.Cursor().First()
	return prune(tx, parseRev(oldest))
}

// atOrBefore moves c to the latest version at or before rev: nil when
// every version is newer.
func atOrBefore(c *bbolt.Cursor, rev int64) (k, v []byte) {
	if k, _ := c.Seek(revKey(rev + 1)); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// prune drops, for every object, the versions no kept entry (all at or
// after oldest) and no current object reads: everything before its
// latest version at or before oldest, and that one too when it is a
// tombstone.
func prune(tx *bbolt.Tx, oldest int64) error {
	versions := tx.Bucket(versionsBucket)
	var empty [][]byte
	err := versions.ForEachBucket(func(name []byte) error {
		b := versions.Bucket(name)
		var drop [][]byte
		c := b.Cursor()
		k, v := atOrBefore(c, oldest)
		if k == nil {
			return nil // every version is newer than the oldest entry
		}
		if val, _ := store.DecodeValue(v); val.Deleted {
			drop = append(drop, append([]byte(nil), k...))
		}
		for k, _ = c.Prev(); k != nil; k, _ = c.Prev() {
			drop = append(drop, append([]byte(nil), k...))
		}
		for _, d := range drop {
			if err := b.Delete(d); err != nil {
				return err
			}
		}
		if first, _ := b.Cursor().First(); first == nil {
			empty = append(empty, append([]byte(nil), name...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range empty {
		if err := versions.DeleteBucket(name); err != nil {
			return err
		}
	}
	return nil
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

// At returns one history entry with the whole config as of its revision:
// each object's latest version at or before it. Leases show as written.
func (s *Store) At(ctx context.Context, rev int64) (store.Entry, error) {
	var e store.Entry
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(historyBucket).Get(revKey(rev))
		if v == nil {
			return fmt.Errorf("revision %d: %w (the history keeps the latest revisions only)", rev, store.ErrNotFound)
		}
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		e.Objects = nil
		versions := tx.Bucket(versionsBucket)
		return versions.ForEachBucket(func(name []byte) error {
			k, v := atOrBefore(versions.Bucket(name).Cursor(), rev)
			if k == nil {
				return nil // created after rev
			}
			o, ok, err := decodeVersion(s.ring, parseObjectKey(name), parseRev(k), v)
			if ok {
				e.Objects = append(e.Objects, o)
			}
			return err
		})
	})
	return e, err
}

var (
	_ store.Store = (*Store)(nil)
	_ interface {
		Size() (int64, error)
	} = (*Store)(nil)
)
