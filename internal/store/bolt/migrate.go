package bolt

import (
	"encoding/json"
	"sort"

	bbolt "go.etcd.io/bbolt"

	"github.com/pylon-xds/pylon/internal/store"
)

// migrate1 turns a format 1 file (each object's JSON record with its body;
// each history entry with a copy of every object) into format 2 in the
// transaction that opens it: a crash leaves the old file as it was. Each
// distinct (object, revision) becomes one version; an object an entry has
// and the next entry (or the current set) lacks gets a tombstone at that
// next revision, so At reads every kept revision as it was. The bodies are
// written as they were, in clear: Reseal seals them.
func migrate1(tx *bbolt.Tx) error {
	hist := tx.Bucket(historyBucket)
	var entries []store.Entry
	if err := hist.ForEach(func(_, v []byte) error {
		var e store.Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	}); err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Revision < entries[j].Revision })
	cur, err := oldObjects(tx)
	if err != nil {
		return err
	}
	// The states in order: every entry, then what is current now.
	states := make([][]store.Object, 0, len(entries)+1)
	revs := make([]int64, 0, len(entries)+1)
	for _, e := range entries {
		states, revs = append(states, e.Objects), append(revs, e.Revision)
	}
	states, revs = append(states, cur), append(revs, revision(tx))
	if err := writeVersions(tx, states, revs); err != nil {
		return err
	}
	for _, e := range entries {
		e.Objects = nil
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := hist.Put(revKey(e.Revision), v); err != nil {
			return err
		}
	}
	objs := tx.Bucket(objectsBucket)
	for _, o := range cur {
		m, err := json.Marshal(meta{Revision: o.Revision, Expires: o.Expires})
		if err != nil {
			return err
		}
		if err := objs.Put(objectKey(o.Key), m); err != nil {
			return err
		}
	}
	return nil
}

// oldObjects reads the format 1 objects bucket.
func oldObjects(tx *bbolt.Tx) ([]store.Object, error) {
	var out []store.Object
	err := tx.Bucket(objectsBucket).ForEach(func(_, v []byte) error {
		var o store.Object
		if err := json.Unmarshal(v, &o); err != nil {
			return err
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

// writeVersions stores each distinct version of states once, and a
// tombstone where an object leaves between two states.
func writeVersions(tx *bbolt.Tx, states [][]store.Object, revs []int64) error {
	versions := tx.Bucket(versionsBucket)
	var prev map[store.Key]bool
	for i, state := range states {
		now := map[store.Key]bool{}
		for _, o := range state {
			now[o.Key] = true
			b, err := versions.CreateBucketIfNotExists(objectKey(o.Key))
			if err != nil {
				return err
			}
			if b.Get(revKey(o.Revision)) == nil {
				if err := b.Put(revKey(o.Revision), encodeVersion(nil, o.Key, o.Body, o.Expires)); err != nil {
					return err
				}
			}
		}
		for k := range prev {
			if !now[k] {
				if err := versions.Bucket(objectKey(k)).Put(revKey(revs[i]), store.Tombstone()); err != nil {
					return err
				}
			}
		}
		prev = now
	}
	return nil
}
