package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pylon-xds/pylon/internal/store"
)

// maxAttempts bounds how often a commit is planned again because the
// store moved between its reads and its transaction (another replica's
// commit, a lease expiring).
const maxAttempts = 20

// maxLeaseTTL is etcd's largest lease TTL, in seconds.
const maxLeaseTTL = 9_000_000_000

// snapshot is what a commit read, all at one revision.
type snapshot struct {
	at       int64                       // the etcd revision read at
	meta     int64                       // P/meta's mod revision: the last commit
	history  []*mvccpb.KeyValue          // entry keys, oldest first
	objects  map[string]*mvccpb.KeyValue // changed objects that exist, by key
	versions []*mvccpb.KeyValue          // version keys, read when the commit prunes
}

// plan is a commit ready to send.
type plan struct {
	cmps      []clientv3.Cmp
	ops       []clientv3.Op
	leased    []int   // indexes of changes that need a new lease
	oldLeases []int64 // leases the commit leaves empty
	pruned    bool    // the commit drops history entries
	oldest    int64   // the oldest kept entry's etcd revision after it; 0: the new one
}

// Commit applies changes atomically at a new revision and records entry.
func (s *Store) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	return s.CommitSince(ctx, 0, changes, entry, keep)
}

// CommitSince is Commit on the condition that no commit was made after
// revision since (a List's revision; 0: no condition), else ErrConflict.
// Per-object revisions cannot protect a whole configuration validated at
// one revision: two replicas validating at once, one deleting a service
// and the other adding a route to it, would each pass. With replicas, the
// config service commits what it validated at revision R with
// CommitSince(R). Lease renewals and expiries do not count as commits.
func (s *Store) CommitSince(ctx context.Context, since int64, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	seen := make(map[store.Key]bool, len(changes))
	for _, c := range changes {
		if seen[c.Key] {
			return 0, fmt.Errorf("%s/%s: changed twice in one commit", c.Kind, c.Name)
		}
		seen[c.Key] = true
	}
	for attempt := range maxAttempts {
		rev, done, err := s.commitOnce(ctx, since, changes, entry, keep)
		if err != nil || done {
			return rev, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: the store kept changing under this commit (%d attempts: other replicas are writing); retry", store.ErrConflict, maxAttempts)
}

// commitOnce reads, checks, and sends one transaction. done is false when
// the store moved since the reads: plan again.
func (s *Store) commitOnce(ctx context.Context, since int64, changes []store.Change, entry *store.Entry, keep int) (rev int64, done bool, err error) {
	snap, err := s.readForCommit(ctx, changes)
	if err != nil {
		return 0, true, err
	}
	// The transaction compares P/meta with what was just read: this
	// check covers the time before.
	if since > 0 && snap.meta-s.base > since {
		return 0, true, fmt.Errorf("%w: the store changed since revision %d (a commit at %d): validate again", store.ErrConflict, since, snap.meta-s.base)
	}
	if entry != nil && keep > 0 && len(snap.history)+1 > keep {
		resp, err := s.read(ctx, "reading versions", clientv3.OpGet(s.versionPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(snap.at)))
		if err != nil {
			return 0, true, err
		}
		snap.versions = kvs(resp, 0)
	}
	p, err := s.plan(snap, changes, entry, keep)
	if err != nil {
		return 0, true, err
	}
	// Each leased change adds two puts once its lease is granted.
	if n := max(len(p.cmps), len(p.ops)+2*len(p.leased)); n > s.maxOps {
		return 0, true, fmt.Errorf("etcd store at %s: a commit of %d changes needs %d operations in one transaction, more than etcd allows (--max-txn-ops %d): %s, or raise etcd's limit and this store's with it: %w", s.where, len(changes), n, s.maxOps, splitAdvice, store.ErrTooLarge)
	}
	if p.pruned {
		s.prune(&p, snap.versions, s.maxOps-len(p.ops)-2*len(p.leased))
	}
	granted, err := s.grantLeases(ctx, changes, &p)
	if err != nil {
		return 0, true, err
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.cli.Txn(tctx).If(p.cmps...).Then(p.ops...).Commit()
	cancel()
	if err != nil || !resp.Succeeded {
		// A failed transaction wrote nothing; on an error it may have,
		// and then the leases are in use: they expire on their own.
		if err == nil {
			s.revoke(ctx, granted)
		}
		return 0, err != nil, s.failWrite("commit", err, true)
	}
	s.revoke(ctx, p.oldLeases)
	rev = resp.Header.Revision - s.base
	if entry != nil {
		entry.Revision = rev
	}
	return rev, true, nil
}

// readForCommit reads P/meta, the history keys and each changed object at
// one revision: the first transaction fixes the revision, the objects that
// do not fit in it (maxOps reads each) are read at that revision.
func (s *Store) readForCommit(ctx context.Context, changes []store.Change) (snapshot, error) {
	snap := snapshot{objects: map[string]*mvccpb.KeyValue{}}
	keys := make([]string, len(changes))
	for i, c := range changes {
		keys[i] = s.objectKey(c.Key)
	}
	first := min(len(keys), max(s.maxOps-2, 1))
	ops := []clientv3.Op{
		clientv3.OpGet(s.metaKey()),
		clientv3.OpGet(s.historyPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
	}
	for _, k := range keys[:first] {
		ops = append(ops, clientv3.OpGet(k))
	}
	resp, err := s.read(ctx, "reading before a commit", ops...)
	if err != nil {
		return snap, err
	}
	if m := kvs(resp, 0); len(m) == 1 {
		snap.meta = m[0].ModRevision
	} else {
		return snap, fmt.Errorf("etcd store at %s: %s is gone: the store was deleted under this Pylon", s.where, s.metaKey())
	}
	snap.at, snap.history = resp.Header.Revision, kvs(resp, 1)
	s.addObjects(&snap, resp, 2)
	for rest := keys[first:]; len(rest) > 0; {
		n := min(len(rest), s.maxOps)
		ops = ops[:0]
		for _, k := range rest[:n] {
			ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(snap.at)))
		}
		resp, err := s.read(ctx, "reading before a commit", ops...)
		if err != nil {
			return snap, err
		}
		s.addObjects(&snap, resp, 0)
		rest = rest[n:]
	}
	return snap, nil
}

// addObjects records the objects read by resp's ranges from the from-th.
func (s *Store) addObjects(snap *snapshot, resp *clientv3.TxnResponse, from int) {
	for j := from; j < len(resp.Responses); j++ {
		for _, kv := range kvs(resp, j) {
			snap.objects[string(kv.Key)] = kv
		}
	}
}

// plan checks the changes against what was read and builds the
// transaction: compares, then the writes.
func (s *Store) plan(snap snapshot, changes []store.Change, entry *store.Entry, keep int) (plan, error) {
	var p plan
	p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(s.metaKey()), "=", snap.meta))
	// A value is still read by a kept entry when the newest entry is at
	// or after the revision that wrote it.
	var lastEntry int64
	if n := len(snap.history); n > 0 {
		lastEntry = snap.history[n-1].CreateRevision
	}
	// ... and when that entry outlives this commit's pruning.
	lastKept := entry == nil || keep <= 0 || keep >= 2
	for i, c := range changes {
		key := s.objectKey(c.Key)
		cur := snap.objects[key]
		var curMod int64
		if cur != nil {
			curMod = cur.ModRevision
		}
		if c.Revision == -1 && cur != nil || c.Revision > 0 && (cur == nil || curMod-s.base != c.Revision) {
			return p, fmt.Errorf("%w: %s/%s", store.ErrConflict, c.Kind, c.Name)
		}
		p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", curMod))
		if cur != nil {
			if cur.ModRevision <= lastEntry && lastKept {
				p.ops = append(p.ops, clientv3.OpPut(s.versionKey(c.Key, cur.ModRevision-s.base), string(cur.Value)))
			}
			if cur.Lease != 0 {
				// The old lease's record goes with this commit, so that
				// revoking the then empty lease writes nothing: a
				// revision is a commit, not housekeeping.
				p.ops = append(p.ops, clientv3.OpDelete(s.leaseKey(clientv3.LeaseID(cur.Lease))))
				p.oldLeases = append(p.oldLeases, cur.Lease)
			}
		}
		switch {
		case c.Body == nil && cur != nil:
			p.ops = append(p.ops, clientv3.OpDelete(key))
		case c.Body == nil:
		case c.Expires.IsZero():
			p.ops = append(p.ops, clientv3.OpPut(key, string(s.encodeValue(c.Key, c.Body, time.Time{}))))
		default:
			p.leased = append(p.leased, i) // the puts, once the lease is granted
		}
	}
	p.ops = append(p.ops, clientv3.OpPut(s.metaKey(), string(must(json.Marshal(metaValue{Format: format})))))
	if entry == nil {
		return p, nil
	}
	e := *entry
	e.Objects, e.Revision = nil, 0
	p.ops = append(p.ops, clientv3.OpPut(s.historyPrefix()+pad(snap.meta), string(must(json.Marshal(e)))))
	if keep > 0 && len(snap.history)+1 > keep {
		drop := len(snap.history) + 1 - keep
		for _, kv := range snap.history[:drop] {
			p.ops = append(p.ops, clientv3.OpDelete(string(kv.Key)))
		}
		p.pruned = true
		if drop < len(snap.history) {
			p.oldest = snap.history[drop].CreateRevision
		}
	}
	return p, nil
}

// prune adds to p the deletion of the versions no entry kept after it
// reads: those whose span ended at or before the oldest kept entry (or
// every one, when only the new entry is kept), as many as the
// transaction has room for. What does not fit is garbage no read
// returns, for the next pruning. In the commit's own transaction, so
// housekeeping never takes a revision of its own.
func (s *Store) prune(p *plan, versions []*mvccpb.KeyValue, room int) {
	for _, kv := range versions {
		if room <= 0 {
			return
		}
		if p.oldest == 0 || kv.CreateRevision <= p.oldest {
			p.ops = append(p.ops, clientv3.OpDelete(string(kv.Key)))
			room--
		}
	}
}

// backoff spaces out attempts after a lost race, with jitter, so that
// replicas committing at once do not collide again in step.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(1<<min(attempt, 6)) * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err) // only fixed-shape structs are marshalled
	}
	return b
}

// ttl is the lease TTL, in seconds, that reaches expires.
func (s *Store) ttl(expires time.Time) int64 {
	d := expires.Sub(s.now())
	secs := int64(math.Ceil(d.Seconds()))
	return min(max(secs, 1), maxLeaseTTL)
}

// grantLeases grants one lease per leased change and adds its puts (the
// object and its lease record) to the plan. It returns the leases.
func (s *Store) grantLeases(ctx context.Context, changes []store.Change, p *plan) ([]int64, error) {
	var granted []int64
	for _, i := range p.leased {
		c := changes[i]
		ttl := s.ttl(c.Expires)
		id, err := s.grant(ctx, ttl, c.Key)
		if err != nil {
			s.revoke(ctx, granted)
			return nil, err
		}
		granted = append(granted, int64(id))
		rec := must(json.Marshal(leaseRecord{Object: c.Kind + "/" + c.Name, Expires: c.Expires, TTL: ttl}))
		p.ops = append(p.ops,
			clientv3.OpPut(s.objectKey(c.Key), string(s.encodeValue(c.Key, c.Body, c.Expires)), clientv3.WithLease(id)),
			clientv3.OpPut(s.leaseKey(id), string(rec), clientv3.WithLease(id)))
	}
	return granted, nil
}

func (s *Store) grant(ctx context.Context, ttl int64, k store.Key) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, s.fail("granting the lease of "+k.Kind+"/"+k.Name, err)
	}
	return resp.ID, nil
}

// revoke drops leases nothing needs any more, at once rather than at the
// end of their TTL. Best effort: a lease left behind expires by itself and
// holds nothing but its own record.
func (s *Store) revoke(ctx context.Context, ids []int64) {
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, _ = s.cli.Revoke(rctx, clientv3.LeaseID(id))
		cancel()
	}
}

// Touch renews a lease without changing the object: a KeepAliveOnce and a
// new lease record when the granted TTL reaches the new expiry, otherwise
// a move to a longer lease (the same content at a new revision).
func (s *Store) Touch(ctx context.Context, k store.Key, expires time.Time) error {
	for attempt := range maxAttempts {
		done, err := s.touchOnce(ctx, k, expires)
		if err != nil || done {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %s/%s kept changing while its lease was renewed; retry", store.ErrConflict, k.Kind, k.Name)
}

func (s *Store) touchOnce(ctx context.Context, k store.Key, expires time.Time) (bool, error) {
	what := k.Kind + "/" + k.Name
	resp, err := s.read(ctx, "reading "+what, clientv3.OpGet(s.objectKey(k)))
	if err != nil {
		return true, err
	}
	if len(kvs(resp, 0)) == 0 {
		return true, store.ErrNotFound
	}
	kv := kvs(resp, 0)[0]
	var rec leaseRecord
	if kv.Lease != 0 {
		lr, err := s.read(ctx, "reading the lease of "+what, clientv3.OpGet(s.leaseKey(clientv3.LeaseID(kv.Lease)), clientv3.WithRev(resp.Header.Revision)))
		if err != nil {
			return true, err
		}
		if l := kvs(lr, 0); len(l) > 0 {
			_ = json.Unmarshal(l[0].Value, &rec)
		}
	}
	if expires.IsZero() || kv.Lease == 0 || rec.TTL == 0 || s.ttl(expires) > rec.TTL {
		// No lease yet, a longer one, or none any more: write the same
		// content on a new lease (or none), with the commit's checks.
		o, err := s.decodeValue(k, kv.Value)
		if err != nil {
			return true, err
		}
		_, err = s.Commit(ctx, []store.Change{{Key: k, Body: o.Body, Expires: expires, Revision: kv.ModRevision - s.base}}, nil, 0)
		if errors.Is(err, store.ErrConflict) {
			return false, nil
		}
		return true, err
	}
	kctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err = s.cli.KeepAliveOnce(kctx, clientv3.LeaseID(kv.Lease))
	cancel()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return true, store.ErrNotFound // it expired just now
		}
		return true, s.fail("renewing the lease of "+what, err)
	}
	rec.Expires = expires
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tr, err := s.cli.Txn(tctx).
		If(clientv3.Compare(clientv3.ModRevision(s.objectKey(k)), "=", kv.ModRevision)).
		Then(clientv3.OpPut(s.leaseKey(clientv3.LeaseID(kv.Lease)), string(must(json.Marshal(rec))), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))).
		Commit()
	if err != nil {
		return true, s.failWrite("renewing the lease of "+what, err, true)
	}
	return tr.Succeeded, nil
}
