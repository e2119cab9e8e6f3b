package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A board is where each replica keeps a few values of its own under
// P/s/<replica, path-escaped>/<shard, padded>, all on one etcd lease the
// replica keeps alive: when the replica dies, etcd deletes its values for
// everyone once the lease's TTL passes. Fleet status uses it for each
// replica's summary of its proxies. It is runtime state, outside the
// store's objects, history and revisions.

// MaxBoardValue bounds one board value: below etcd's default request limit
// (1.5 MiB), with room for the key and the request's framing.
const MaxBoardValue = 1<<20 + 256<<10

// maxBoardReplicas and maxBoardShards bound what Boards reads: a board
// is written by Pylon replicas, but etcd is shared, and a read must not
// be made unbounded by whatever else writes under the prefix.
const (
	maxBoardReplicas = 256
	maxBoardShards   = 4096
)

// Board is one replica's area of the board. It is not safe for concurrent
// use: its owner (one loop) calls it.
type Board struct {
	s       *Store
	replica string
	ttl     int64
	lease   clientv3.LeaseID
	written int // shards written last time, so that extra ones are deleted
}

// Board returns the area of replica, whose values live on a lease of ttl
// (rounded up to a second, at least 2s).
func (s *Store) Board(replica string, ttl time.Duration) *Board {
	secs := int64((ttl + time.Second - 1) / time.Second)
	return &Board{s: s, replica: replica, ttl: max(secs, 2)}
}

func (s *Store) boardPrefix() string { return s.prefix + "/s/" }

func (b *Board) key(shard int) string {
	return fmt.Sprintf("%s%s/%06d", b.s.boardPrefix(), url.PathEscape(b.replica), shard)
}

// Put replaces the replica's values with shards, on its lease (granted
// when it has none). Each shard is one etcd put: together they may exceed
// what one transaction may carry, so a reader can briefly see some shards
// new and some old (the caller's encoding says which belong together).
// Shards left from a longer previous Put are deleted.
func (b *Board) Put(ctx context.Context, shards [][]byte) error {
	if len(shards) > maxBoardShards {
		return fmt.Errorf("etcd board %s: %d values, at most %d", b.replica, len(shards), maxBoardShards)
	}
	if b.lease == 0 {
		ctx, cancel := context.WithTimeout(ctx, b.s.timeout)
		g, err := b.s.cli.Grant(ctx, b.ttl)
		cancel()
		if err != nil {
			return b.s.fail("granting the status lease", err)
		}
		b.lease = g.ID
	}
	for i, v := range shards {
		if len(v) > MaxBoardValue {
			return fmt.Errorf("etcd board %s: value %d is %d bytes, at most %d", b.replica, i, len(v), MaxBoardValue)
		}
		if err := b.op(ctx, "publishing status", clientv3.OpPut(b.key(i), string(v), clientv3.WithLease(b.lease))); err != nil {
			return err
		}
	}
	if len(shards) < b.written {
		// One request for all of them: after a lost lease how many are
		// left is unknown (up to maxBoardShards), and deleting them one by
		// one could outlast the new lease, which takes the values just put.
		rest := clientv3.OpDelete(b.key(len(shards)), clientv3.WithRange(b.key(maxBoardShards)))
		if err := b.op(ctx, "deleting old status", rest); err != nil {
			return err
		}
	}
	b.written = len(shards)
	return nil
}

// op runs one operation within the store's timeout. A lease etcd no
// longer knows (it expired while etcd was away) is forgotten, so the next
// Put grants a new one and writes everything again.
func (b *Board) op(ctx context.Context, what string, op clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, b.s.timeout)
	defer cancel()
	_, err := b.s.cli.Do(ctx, op)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.forget()
	}
	return b.s.fail(what, err)
}

func (b *Board) forget() {
	b.lease = 0
	b.written = maxBoardShards // unknown: delete whatever may be left
}

// KeepAlive renews the lease once. It reports whether the values are
// still there: false when there is no lease yet or etcd forgot it (then
// the caller puts them again).
func (b *Board) KeepAlive(ctx context.Context) (bool, error) {
	if b.lease == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.s.timeout)
	defer cancel()
	_, err := b.s.cli.KeepAliveOnce(ctx, b.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.forget()
		return false, nil
	}
	if err != nil {
		return false, b.s.fail("renewing the status lease", err)
	}
	return true, nil
}

// Revoke deletes the replica's values at once (a clean stop: its proxies
// are moving to other replicas, and should not show here meanwhile).
func (b *Board) Revoke(ctx context.Context) error {
	if b.lease == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.s.timeout)
	defer cancel()
	_, err := b.s.cli.Revoke(ctx, b.lease)
	b.lease, b.written = 0, 0
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return b.s.fail("revoking the status lease", err)
	}
	return nil
}

// Boards reads every replica's values, by replica, each in shard order.
// At most maxBoardReplicas replicas and maxBoardShards values in all are
// read; more is an error naming the prefix.
func (s *Store) Boards(ctx context.Context) (map[string][][]byte, error) {
	resp, err := s.read(ctx, "reading fleet status", clientv3.OpGet(s.boardPrefix(), clientv3.WithPrefix(), clientv3.WithLimit(maxBoardShards+1), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)))
	if err != nil {
		return nil, err
	}
	list := kvs(resp, 0)
	if len(list) > maxBoardShards {
		return nil, fmt.Errorf("etcd board %s: more than %d values", s.boardPrefix(), maxBoardShards)
	}
	out := map[string][][]byte{}
	for _, kv := range list {
		rest := strings.TrimPrefix(string(kv.Key), s.boardPrefix())
		esc, _, ok := strings.Cut(rest, "/")
		replica, err := url.PathUnescape(esc)
		if !ok || err != nil {
			continue // not ours: ignored
		}
		if _, seen := out[replica]; !seen && len(out) == maxBoardReplicas {
			return nil, fmt.Errorf("etcd board %s: more than %d replicas", s.boardPrefix(), maxBoardReplicas)
		}
		out[replica] = append(out[replica], kv.Value)
	}
	return out, nil
}
