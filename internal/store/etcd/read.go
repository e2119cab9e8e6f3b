package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pylon-xds/pylon/internal/store"
)

// read runs ops as one transaction: every read sees the same revision.
func (s *Store) read(ctx context.Context, op string, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, s.fail(op, err)
	}
	return resp, nil
}

func kvs(resp *clientv3.TxnResponse, i int) []*mvccpb.KeyValue {
	return resp.Responses[i].GetResponseRange().Kvs
}

// leaseRecords decodes the lease records, by lease id.
func leaseRecords(list []*mvccpb.KeyValue) map[int64]leaseRecord {
	out := make(map[int64]leaseRecord, len(list))
	for _, kv := range list {
		var l leaseRecord
		if json.Unmarshal(kv.Value, &l) == nil {
			out[kv.Lease] = l
		}
	}
	return out
}

// List returns every object and the etcd revision (less the base) it
// read them at.
func (s *Store) List(ctx context.Context) ([]store.Object, int64, error) {
	resp, err := s.read(ctx, "listing objects",
		clientv3.OpGet(s.objPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.leasePrefix(), clientv3.WithPrefix()))
	if err != nil {
		return nil, 0, err
	}
	leases := leaseRecords(kvs(resp, 1))
	objs := make([]store.Object, 0, len(kvs(resp, 0)))
	for _, kv := range kvs(resp, 0) {
		o, err := s.object(kv, leases)
		if err != nil {
			return nil, 0, err
		}
		objs = append(objs, o)
	}
	return objs, resp.Header.Revision - s.base, nil
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Object, error) {
	resp, err := s.read(ctx, "reading "+k.Kind+"/"+k.Name, clientv3.OpGet(s.objectKey(k)))
	if err != nil {
		return store.Object{}, err
	}
	list := kvs(resp, 0)
	if len(list) == 0 {
		return store.Object{}, store.ErrNotFound
	}
	kv := list[0]
	var leases map[int64]leaseRecord
	if kv.Lease != 0 {
		// The record as of the same revision: the lease and the object
		// are written together.
		lr, err := s.read(ctx, "reading the lease of "+k.Kind+"/"+k.Name,
			clientv3.OpGet(s.leaseKey(clientv3.LeaseID(kv.Lease)), clientv3.WithRev(resp.Header.Revision)))
		if err != nil {
			return store.Object{}, err
		}
		leases = leaseRecords(kvs(lr, 0))
	}
	return s.object(kv, leases)
}

// history reads the entries from their keys, oldest first.
func (s *Store) history(list []*mvccpb.KeyValue) ([]store.Entry, error) {
	out := make([]store.Entry, 0, len(list))
	for _, kv := range list {
		var e store.Entry
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			return nil, fmt.Errorf("history entry %s: %w", kv.Key, err)
		}
		e.Revision = kv.CreateRevision - s.base
		e.Objects = nil
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// History returns the entries, newest first, without objects.
func (s *Store) History(ctx context.Context) ([]store.Entry, error) {
	resp, err := s.read(ctx, "reading the history", clientv3.OpGet(s.historyPrefix(), clientv3.WithPrefix()))
	if err != nil {
		return nil, err
	}
	h, err := s.history(kvs(resp, 0))
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(h)-1; i < j; i, j = i+1, j-1 {
		h[i], h[j] = h[j], h[i]
	}
	return h, nil
}

// At returns one history entry with every object as of its revision:
// current objects written at or before it, and past versions whose span
// covers it. Leases show as written.
func (s *Store) At(ctx context.Context, rev int64) (store.Entry, error) {
	resp, err := s.read(ctx, fmt.Sprintf("reading revision %d", rev),
		clientv3.OpGet(s.historyPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.objPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.versionPrefix(), clientv3.WithPrefix()))
	if err != nil {
		return store.Entry{}, err
	}
	h, err := s.history(kvs(resp, 0))
	if err != nil {
		return store.Entry{}, err
	}
	i := sort.Search(len(h), func(i int) bool { return h[i].Revision >= rev })
	if i == len(h) || h[i].Revision != rev {
		return store.Entry{}, fmt.Errorf("revision %d: %w (the history keeps the latest revisions only)", rev, store.ErrNotFound)
	}
	e := h[i]
	for _, kv := range kvs(resp, 1) {
		if kv.ModRevision-s.base > rev {
			continue // written after rev: a version, if any, has rev
		}
		o, err := s.object(kv, nil) // leases as written
		if err != nil {
			return store.Entry{}, err
		}
		e.Objects = append(e.Objects, o)
	}
	for _, kv := range kvs(resp, 2) {
		k, from, err := s.parseVersionKey(string(kv.Key))
		if err != nil {
			return store.Entry{}, err
		}
		if from > rev || kv.CreateRevision-s.base <= rev {
			continue // the span [from, replaced) misses rev
		}
		o, err := s.decodeValue(k, kv.Value)
		if err != nil {
			return store.Entry{}, err
		}
		o.Revision = from
		e.Objects = append(e.Objects, o)
	}
	return e, nil
}
