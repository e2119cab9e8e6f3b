package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pylon-xds/pylon/internal/store"
)

// Reseal seals again, under the keyring's first key, every body that is
// not sealed under it: clear text written before a key was configured, or
// sealed under an older key. It returns how many it sealed. With no
// keyring it does nothing.
//
// Current objects are written again with their content unchanged, through
// the commit path (no history entry; each batch a revision, watched by the
// other replicas, who read the same content): rewriting one in place would
// move its mod revision, its store revision, past the history entries that
// read it. Past versions are rewritten in place: a version's span is its
// key's create revision, which a put keeps. A value another replica
// changes meanwhile is read again, a bounded number of times.
//
// etcd keeps the values replaced in its MVCC history until it is
// compacted: docs/security.md says how to compact after a reseal.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if s.ring == nil {
		return 0, nil
	}
	n, err := s.resealObjects(ctx)
	if err != nil {
		return n, err
	}
	m, err := s.resealVersions(ctx)
	return n + m, err
}

// resealBatch is how many objects one reseal commit takes: each needs a
// compare and up to four operations (its value, a version, a lease and
// its record), within etcd's --max-txn-ops.
func (s *Store) resealBatch() int { return max(1, s.maxOps/4-1) }

func (s *Store) resealObjects(ctx context.Context) (int, error) {
	n := 0
	for attempt := range maxAttempts {
		changes, err := s.staleObjects(ctx)
		if err != nil || len(changes) == 0 {
			return n, err
		}
		conflict := false
		for len(changes) > 0 {
			batch := changes[:min(len(changes), s.resealBatch())]
			changes = changes[len(batch):]
			_, err := s.Commit(ctx, batch, nil, 0)
			if errors.Is(err, store.ErrConflict) {
				conflict = true // changed meanwhile: read again
				continue
			}
			if err != nil {
				return n, fmt.Errorf("re-encrypting the stored objects: %w", err)
			}
			n += len(batch)
		}
		if !conflict {
			return n, nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return n, err
		}
	}
	return n, fmt.Errorf("%w: re-encrypting the stored objects: they kept changing (%d attempts); restart to try again", store.ErrConflict, maxAttempts)
}

// staleObjects lists the current objects whose body is not sealed under
// the first key, as changes writing the same content at the revision
// read, leases as they are.
func (s *Store) staleObjects(ctx context.Context) ([]store.Change, error) {
	resp, err := s.read(ctx, "listing objects to re-encrypt",
		clientv3.OpGet(s.objPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.leasePrefix(), clientv3.WithPrefix()))
	if err != nil {
		return nil, err
	}
	leases := leaseRecords(kvs(resp, 1))
	var out []store.Change
	for _, kv := range kvs(resp, 0) {
		if val, ok := store.DecodeValue(kv.Value); ok && s.ring.Current(val.Body) {
			continue
		}
		o, err := s.object(kv, leases)
		if err != nil {
			return nil, err
		}
		// The same content, lease and revision: a write that changes
		// nothing but the key that seals it.
		out = append(out, store.Change(o))
	}
	return out, nil
}

func (s *Store) resealVersions(ctx context.Context) (int, error) {
	n := 0
	for attempt := range maxAttempts {
		resp, err := s.read(ctx, "listing versions to re-encrypt", clientv3.OpGet(s.versionPrefix(), clientv3.WithPrefix()))
		if err != nil {
			return n, err
		}
		var stale []*mvccpb.KeyValue
		for _, kv := range kvs(resp, 0) {
			if val, ok := store.DecodeValue(kv.Value); !ok || !s.ring.Current(val.Body) {
				stale = append(stale, kv)
			}
		}
		if len(stale) == 0 {
			return n, nil
		}
		done, err := s.resealInPlace(ctx, stale)
		n += done
		if err != nil {
			return n, err
		}
		if done < len(stale) {
			if err := backoff(ctx, attempt); err != nil {
				return n, err
			}
		}
	}
	return n, fmt.Errorf("%w: re-encrypting the history: it kept changing (%d attempts); restart to try again", store.ErrConflict, maxAttempts)
}

// resealInPlace rewrites versions, each on the condition that it did not
// change since it was read (a pruning commit may delete it), in
// transactions within --max-txn-ops. It returns how many it rewrote.
func (s *Store) resealInPlace(ctx context.Context, stale []*mvccpb.KeyValue) (int, error) {
	n := 0
	for len(stale) > 0 {
		batch := stale[:min(len(stale), s.maxOps)]
		stale = stale[len(batch):]
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, kv := range batch {
			k, _, err := s.parseVersionKey(string(kv.Key))
			if err != nil {
				return n, err
			}
			o, err := s.decodeValue(k, kv.Value)
			if err != nil {
				return n, err
			}
			v := s.encodeValue(k, o.Body, o.Expires)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
			ops = append(ops, clientv3.OpPut(string(kv.Key), string(v)))
		}
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			return n, s.failWrite("re-encrypting the history", err, true)
		}
		if resp.Succeeded {
			n += len(batch)
		}
	}
	return n, nil
}
