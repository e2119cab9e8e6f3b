// Package etcd is the store shared by several replicas: objects, history
// and leases kept in etcd under one prefix, so that any replica can read
// and write the same configuration and learn of every change by watching.
// Nothing here replicates or elects anything: etcd does.
//
// Layout under the prefix P (default "/pylon"):
//
//	P/meta                   {"format":1}; its create revision is the base
//	                         (below), its mod revision the last commit
//	P/o/<kind>/<name>        the current object: a tag byte, the lease as
//	                         written (unix ns, 0 for none), the body; on the
//	                         object's etcd lease when it has one
//	P/l/<lease id, hex>      the lease's record: object, expiry as last
//	                         renewed, TTL granted; on the same etcd lease
//	P/v/<kind>/<name>/<rev>  a past version: the value the object had from
//	                         store revision rev until this key's create
//	                         revision, kept only while a history entry
//	                         reads it
//	P/h/<n>                  a history entry (JSON); its revision is the
//	                         key's create revision
//
// <kind> is path-escaped (it never holds a slash), <name> is as given; the
// numbers are zero-padded to 20 digits so keys sort by them.
//
// Revisions. A commit is one etcd transaction, so a store revision is an
// etcd revision: store revision r is etcd revision base+r, where base is
// the etcd revision at which the prefix was first used. The offset is a
// constant every replica reads from P/meta; it makes a fresh store start
// at revision 1, as the embedded store does and as operators expect,
// whatever else the etcd cluster holds. List's revision is the etcd
// revision it read at, so it also counts lease renewals and expiries and
// other users' writes to the same etcd: the same revision always means the
// same content, but consecutive revisions need not differ in content.
//
// A transaction cannot name a key after its own revision, so versions and
// history entries take their revisions from etcd's create revision of
// their key. A version is written lazily: when a commit replaces or
// deletes an object whose current value a kept history entry reads (the
// object's revision is at or before the newest entry), the old value is
// copied to P/v; otherwise it is simply overwritten. The room a commit
// takes is therefore proportional to what it changes, as in the bbolt
// store. Versions only the pruned entries read are deleted after the
// commit that pruned them (a separate transaction: a failure there leaves
// garbage that no read returns and the next pruning removes).
//
// Optimistic concurrency. A commit reads P/meta, the history keys and each
// changed object, checks the callers' revisions against what it read
// (store.ErrConflict), and commits with etcd compares on the mod revision
// of P/meta and of each changed object: if anything moved meanwhile (a
// commit by another replica, a lease expiring), the transaction fails and
// the commit is planned again from fresh reads, a bounded number of times.
// Commits are thus serialized across replicas, as the bbolt store
// serializes them in one process. CommitSince adds the condition a whole
// validated configuration needs: no commit after the revision it was
// validated at.
//
// Leases. An object written with Expires gets an etcd lease of its own,
// with a TTL reaching its expiry; the object and its lease record are on
// it, so when nobody renews it etcd deletes the object for every replica
// (a watch sees the deletion). Touch renews through any replica: when the
// new expiry fits the TTL granted, a KeepAliveOnce and a new lease record
// (the object's revision is unchanged); when it asks for longer than that
// TTL, the object moves to a new, longer lease, which is a write of the
// same content at a new revision. Renewals with the same TTL, the common
// case, never take that path. An expired object is deleted by etcd at an
// etcd revision with no history entry; At no longer shows it at any
// revision (registered endpoints are runtime state: a rollback leaves them
// alone).
//
// Encryption at rest. With Options.Seal, every object body, current or a
// past version, is sealed (package seal) with its kind and name as the
// additional data; a version is the object's sealed value copied as it
// is. History entries (a summary and a version), lease records, P/meta and
// the board (fleet status) hold no body and stay clear. Reseal seals again
// what is clear or under an older key.
//
// Every call is bounded by Options.Timeout. An etcd that cannot be reached
// gives errors that are store.ErrUnavailable and say "etcd unreachable".
package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
)

// Defaults.
const (
	DefaultPrefix    = "/pylon"
	DefaultTimeout   = 5 * time.Second
	DefaultMaxTxnOps = 128 // etcd's own default for --max-txn-ops
)

// format is the layout this code writes.
const format = 1

// Options configures a Store.
type Options struct {
	// Endpoints are etcd's client URLs or host:port pairs.
	Endpoints []string
	// Prefix is where the store's keys live (default "/pylon"); several
	// independent Pylon fleets can share one etcd under different ones.
	Prefix string
	// TLS, when set, is used for every connection (server verification
	// and, with a certificate, client authentication).
	TLS *tls.Config
	// Timeout bounds each call to etcd (default 5s).
	Timeout time.Duration
	// MaxTxnOps is the most operations etcd accepts in one transaction:
	// set it to the cluster's --max-txn-ops (default 128, etcd's
	// default). A commit needing more is refused before it is sent.
	MaxTxnOps int
	// Now is the clock for lease TTLs (default time.Now).
	Now func() time.Time
	// Seal, when set, seals every body written; without it a sealed
	// body fails to read with an error naming --encryption-key-file.
	Seal *seal.Keyring
}

// Store is a store.Store on etcd.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	base    int64 // etcd revision of store revision 0
	timeout time.Duration
	maxOps  int
	now     func() time.Time
	where   string // the endpoints, for error messages
	ring    *seal.Keyring
}

// Open connects to etcd and prepares the prefix (first use records the
// base revision). It fails with store.ErrUnavailable when etcd cannot be
// reached within the timeout.
func Open(ctx context.Context, opts Options) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	return s.connect(ctx, s.clientConfig(opts))
}

// newStore checks opts and fills in the defaults.
func newStore(opts Options) (*Store, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints given")
	}
	prefix, err := cleanPrefix(opts.Prefix)
	if err != nil {
		return nil, err
	}
	s := &Store{
		prefix:  prefix,
		timeout: opts.Timeout,
		maxOps:  opts.MaxTxnOps,
		now:     opts.Now,
		where:   strings.Join(opts.Endpoints, ","),
		ring:    opts.Seal,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.maxOps <= 0 {
		s.maxOps = DefaultMaxTxnOps
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

func (s *Store) clientConfig(opts Options) clientv3.Config {
	return clientv3.Config{
		Endpoints:   opts.Endpoints,
		TLS:         opts.TLS,
		DialTimeout: s.timeout,
		// The client's own zap logging would bypass the process's slog
		// handler; what matters reaches the caller as errors.
		Logger: zap.NewNop(),
		// Keepalives notice a dead connection while nothing is sent,
		// so that a watch moves to another endpoint.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: s.timeout,
		// gRPC's default backoff grows to two minutes between attempts:
		// after an outage of a minute, a replica would stay degraded
		// (its proxies missing from the other replicas' lists) for up
		// to a minute more once etcd is back. Capped, it notices within
		// reconnectMax.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMax},
			MinConnectTimeout: s.timeout,
		})},
	}
}

// reconnectMax bounds the wait between attempts to reach an etcd that is
// away.
const reconnectMax = 2 * time.Second

// connect makes the client and prepares the prefix.
func (s *Store) connect(ctx context.Context, cfg clientv3.Config) (*Store, error) {
	var err error
	s.cli, err = clientv3.New(cfg)
	if err != nil {
		return nil, s.fail("connecting", err)
	}
	if err := s.prepare(ctx); err != nil {
		s.cli.Close()
		return nil, err
	}
	return s, nil
}

// reserved are the names of the store's own keys and sub-namespaces
// under a prefix (see the layout above).
var reserved = []string{"meta", "o", "l", "v", "h", "s"}

// cleanPrefix checks and normalizes a prefix: absolute, no trailing slash,
// no empty component, and no component that is one of the store's
// sub-namespaces. Every key a store reads, writes or watches is inside
// "<prefix>/", in one of those sub-namespaces: a prefix P2 = P1/s/... would
// put a second fleet's keys inside P1's fleet status (P1/o/... inside its
// objects, and so on), so that one fleet broke the other. Refusing the
// names anywhere in a prefix means no fleet's prefix can reach into
// another's keys, whatever else shares the etcd.
func cleanPrefix(p string) (string, error) {
	if p == "" {
		p = DefaultPrefix
	}
	p = strings.TrimRight(p, "/")
	if !strings.HasPrefix(p, "/") || p == "" || len(p) > 256 {
		return "", fmt.Errorf("etcd store: --etcd-prefix %q: must start with / and be at most 256 bytes, not /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, c := range parts {
		if c == "" {
			return "", fmt.Errorf("etcd store: --etcd-prefix %q: an empty component (//)", p)
		}
		if slices.Contains(reserved, c) {
			outer := "/" + strings.Join(parts[:i], "/")
			return "", fmt.Errorf("etcd store: --etcd-prefix %q: the component %q is a name the store uses for its own keys (%s), so this prefix would reach into the keys of a fleet on %q: choose another",
				p, c, strings.Join(reserved, ", "), outer)
		}
	}
	return p, nil
}

type metaValue struct {
	Format int `json:"format"`
}

// prepare creates P/meta when absent, checks its format and reads the base.
func (s *Store) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	mv, _ := json.Marshal(metaValue{Format: format})
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.metaKey()), "=", 0)).
		Then(clientv3.OpPut(s.metaKey(), string(mv))).
		Else(clientv3.OpGet(s.metaKey())).
		Commit()
	if err != nil {
		return s.fail("opening the store", err)
	}
	if resp.Succeeded {
		s.base = resp.Header.Revision
		return nil
	}
	kv := resp.Responses[0].GetResponseRange().Kvs[0]
	var m metaValue
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		return fmt.Errorf("etcd store at %s: %s is not a Pylon store (%v): choose another --etcd-prefix", s.where, s.metaKey(), err)
	}
	if m.Format > format {
		return fmt.Errorf("etcd store at %s: %s was written by a newer Pylon (format %d; this one reads up to %d)", s.where, s.prefix, m.Format, format)
	}
	s.base = kv.CreateRevision
	return nil
}

// Close releases the connection.
func (s *Store) Close() error { return s.cli.Close() }

// Base is the etcd revision of store revision 0: store revision r is etcd
// revision Base()+r (for an operator reading the keys with etcdctl).
func (s *Store) Base() int64 { return s.base }

// Keys.

func (s *Store) metaKey() string { return s.prefix + "/meta" }

func (s *Store) objPrefix() string { return s.prefix + "/o/" }

func (s *Store) objectKey(k store.Key) string {
	return s.objPrefix() + url.PathEscape(k.Kind) + "/" + k.Name
}

// parseKey reads a key under prefix (objects or versions, without
// the version's revision suffix).
func parseKey(prefix, key string) (store.Key, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	kind, name, ok2 := strings.Cut(rest, "/")
	kind, err := url.PathUnescape(kind)
	if !ok || !ok2 || err != nil {
		return store.Key{}, fmt.Errorf("a key that is not the store's: %q", key)
	}
	return store.Key{Kind: kind, Name: name}, nil
}

func (s *Store) leasePrefix() string { return s.prefix + "/l/" }

func (s *Store) leaseKey(id clientv3.LeaseID) string {
	return s.leasePrefix() + fmt.Sprintf("%016x", int64(id))
}

func (s *Store) versionPrefix() string { return s.prefix + "/v/" }

const revDigits = 20

func pad(n int64) string { return fmt.Sprintf("%0*d", revDigits, n) }

func (s *Store) versionKey(k store.Key, from int64) string {
	return s.versionPrefix() + url.PathEscape(k.Kind) + "/" + k.Name + "/" + pad(from)
}

// parseVersionKey returns a version's object and first store revision.
func (s *Store) parseVersionKey(key string) (store.Key, int64, error) {
	if len(key) < len(s.versionPrefix())+revDigits+1 || key[len(key)-revDigits-1] != '/' {
		return store.Key{}, 0, fmt.Errorf("a version key that is not the store's: %q", key)
	}
	from, err := strconv.ParseInt(key[len(key)-revDigits:], 10, 64)
	if err != nil {
		return store.Key{}, 0, fmt.Errorf("a version key that is not the store's: %q", key)
	}
	k, err := parseKey(s.versionPrefix(), key[:len(key)-revDigits-1])
	return k, from, err
}

func (s *Store) historyPrefix() string { return s.prefix + "/h/" }

// encodeValue is an object's value (store.EncodeValue, as in the bbolt
// store), its body sealed when the store has a keyring.
func (s *Store) encodeValue(k store.Key, body []byte, expires time.Time) []byte {
	return store.EncodeValue(s.ring.Seal(store.SealContext(k), body), expires)
}

// decodeValue reads an object's value (lease as written), opening its
// body.
func (s *Store) decodeValue(k store.Key, v []byte) (store.Object, error) {
	val, ok := store.DecodeValue(v)
	if !ok || val.Deleted {
		return store.Object{}, fmt.Errorf("%s/%s: a damaged record in etcd", k.Kind, k.Name)
	}
	b, err := s.ring.Open(store.SealContext(k), val.Body)
	if err != nil {
		return store.Object{}, fmt.Errorf("etcd store at %s, prefix %s: %w", s.where, s.prefix, err)
	}
	return store.Object{Key: k, Body: append([]byte(nil), b...), Expires: val.Expires}, nil
}

// leaseRecord is P/l/<id>: which object the lease keeps, until when, and
// the TTL etcd granted (a renewal within it is a KeepAliveOnce).
type leaseRecord struct {
	Object  string    `json:"object"`
	Expires time.Time `json:"expires"`
	TTL     int64     `json:"ttl"`
}

// object decodes a current object: its revision from the key's mod
// revision, its lease from the lease record when there is one.
func (s *Store) object(kv *mvccpb.KeyValue, leases map[int64]leaseRecord) (store.Object, error) {
	k, err := parseKey(s.objPrefix(), string(kv.Key))
	if err != nil {
		return store.Object{}, err
	}
	o, err := s.decodeValue(k, kv.Value)
	if err != nil {
		return o, err
	}
	o.Revision = kv.ModRevision - s.base
	if l, ok := leases[kv.Lease]; ok && kv.Lease != 0 {
		o.Expires = l.Expires
	}
	return o, nil
}

var _ store.Store = (*Store)(nil)
var _ store.Watcher = (*Store)(nil)

// ExpiresLeases reports that the store drops leased objects itself: etcd
// deletes an object whose lease ran out, for every replica, so the config
// service runs no expiry of its own (a replica that did would delete
// registrations another replica just renewed).
func (*Store) ExpiresLeases() bool { return true }
