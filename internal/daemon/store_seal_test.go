package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/store/storetest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// TestEncryptionAtRest_EtcdReplicasRotate: replicas on etcd with a key
// seal what they seed; the rotation order docs/security.md gives (the new
// key added second on every replica, then made first on each in turn,
// then the old one removed) keeps every replica reading at every step: a
// replica not restarted yet writes under the old key, which the others
// read, and the last replica's start seals what it wrote again under the
// new key, so that the old key can go.
func TestEncryptionAtRest_EtcdReplicasRotate(t *testing.T) {
	ctx := t.Context()
	srv := etcdtest.Start(t)
	reg := xdstype.New()
	keys := storetest.KeyLines(t, "k1", "k2")
	log := slog.New(slog.DiscardHandler)
	// start is a replica's start with a key file of lines; it runs until
	// the test ends or it is restarted.
	start := func(lines ...string) store.Store {
		t.Helper()
		o := etcdOptions(srv, "/sealed")
		o.ring = storetest.Keyring(t, lines...)
		st, err := openStore(ctx, o, reg, log)
		if err != nil {
			t.Fatalf("a replica with keys %v: %v", o.ring.Names(), err)
		}
		t.Cleanup(func() { st.Close() })
		if _, _, err := st.List(ctx); err != nil {
			t.Fatalf("a replica with keys %v: %v", o.ring.Names(), err)
		}
		return st
	}
	a, b := start(keys["k1"]), start(keys["k1"]) // a seeds, under k1
	write := func(st store.Store, name string) {
		t.Helper()
		if _, err := st.Commit(ctx, []store.Change{{Key: storetest.SecretKey, Body: storetest.SecretBody(name)}}, &store.Entry{Summary: name}, 10); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "before")
	// Step 1: k2 added second, on every replica in turn.
	a.Close()
	a = start(keys["k1"], keys["k2"])
	b.Close()
	b = start(keys["k1"], keys["k2"])
	// Step 2: k2 first, on every replica in turn. a seals all under k2;
	// b, not restarted yet, still writes under k1, which a reads.
	a.Close()
	a = start(keys["k2"], keys["k1"])
	write(b, "lagging")
	if o, err := a.Get(ctx, storetest.SecretKey); err != nil || !bytes.Equal(o.Body, storetest.SecretBody("lagging")) {
		t.Fatalf("a reads b's write under k1: %v", err)
	}
	if raw := rawValues(t, srv, "/sealed/o/"); !bytes.Contains(raw, []byte(seal.Prefix+"k1:")) {
		t.Fatal("the lagging replica's write is not under k1: the test proves nothing")
	}
	b.Close()
	b = start(keys["k2"], keys["k1"])
	if raw := rawValues(t, srv, "/sealed/"); bytes.Contains(raw, []byte(seal.Prefix+"k1:")) || !bytes.Contains(raw, []byte(seal.Prefix+"k2:")) {
		t.Fatalf("after step 2, values are still under k1:\n%.300s", raw)
	}
	// Step 3: k1 removed, on every replica in turn.
	a.Close()
	start(keys["k2"])
	b.Close()
	start(keys["k2"])
}

func rawValues(t *testing.T, srv *etcdtest.Server, prefix string) []byte {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Value))
	}
	if len(out) == 0 {
		t.Fatalf("nothing under %s", prefix)
	}
	return []byte(strings.Join(out, "\n"))
}
