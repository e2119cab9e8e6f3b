package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestEtcdStoreFlagErrors(t *testing.T) {
	etcdOn := func(e EtcdOptions) Options { return Options{Store: StoreEtcd, Etcd: e} }
	eps := []string{"127.0.0.1:2379"}
	for _, c := range []struct {
		name string
		o    Options
		want string // "" for no error
	}{
		{"bolt default", Options{}, ""},
		{"bolt", Options{Store: StoreBolt}, ""},
		{"etcd", etcdOn(EtcdOptions{Endpoints: eps}), ""},
		{"etcd with TLS", etcdOn(EtcdOptions{Endpoints: eps, Cert: "c", Key: "k", CA: "ca"}), ""},
		{"etcd CA only", etcdOn(EtcdOptions{Endpoints: eps, CA: "ca"}), ""},
		{"unknown store", Options{Store: "consul"}, `--store "consul": must be bolt or etcd`},
		{"no endpoints", etcdOn(EtcdOptions{}), "--store etcd needs --etcd-endpoints"},
		{"empty endpoint", etcdOn(EtcdOptions{Endpoints: []string{"127.0.0.1:2379", " "}}), "--etcd-endpoints: an empty endpoint"},
		{"too many endpoints", etcdOn(EtcdOptions{Endpoints: make([]string, maxEtcdEndpoints+1)}), "at most 16"},
		{"cert without key", etcdOn(EtcdOptions{Endpoints: eps, Cert: "c"}), "--etcd-cert and --etcd-key go together"},
		{"key without cert", etcdOn(EtcdOptions{Endpoints: eps, Key: "k"}), "--etcd-cert and --etcd-key go together"},
		{"etcd flags with bolt", Options{Etcd: EtcdOptions{Endpoints: eps}}, "only used with --store etcd"},
		{"etcd prefix with bolt", Options{Store: StoreBolt, Etcd: EtcdOptions{Prefix: "/x"}}, "only used with --store etcd"},
		{"etcd with file mode", Options{Store: StoreEtcd, ConfigPath: "pylon.yaml", Etcd: EtcdOptions{Endpoints: eps}}, "does not go with --config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkStore(c.o)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("checkStore: %v, want %q", err, c.want)
			}
		})
	}
}

// etcdOptions are daemon options on the member under prefix, with short
// bounds so that the tests of an unreachable etcd are quick.
func etcdOptions(srv *etcdtest.Server, prefix string) Options {
	return Options{Store: StoreEtcd, Etcd: EtcdOptions{
		Endpoints: []string{srv.Endpoint()}, Prefix: prefix,
		Timeout: 300 * time.Millisecond, StartTimeout: 10 * time.Second,
	}}
}

// TestEtcdSeededOnce: replicas starting together on a new prefix seed it
// once (the others see a conflict and go on); a store whose objects were
// all deleted is not seeded again (its history says it was used).
func TestEtcdSeededOnce(t *testing.T) {
	ctx := t.Context()
	srv := etcdtest.Start(t)
	o := etcdOptions(srv, "/seed")
	reg := xdstype.New()
	const replicas = 3
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	stores := make([]store.Store, replicas)
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = openStore(ctx, o, reg, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	st := stores[0]
	objs, _, err := st.List(ctx)
	if err != nil || len(objs) == 0 {
		t.Fatalf("after seeding: %d objects (%v)", len(objs), err)
	}
	hist, err := st.History(ctx)
	if err != nil || len(hist) != 1 || !strings.HasPrefix(hist[0].Summary, "seed: ") {
		t.Fatalf("history after %d replicas started: %+v (%v), want one seed", replicas, hist, err)
	}
	// Everything deleted by an operator: a restart does not bring the
	// quickstart back.
	var del []store.Change
	for _, ob := range objs {
		del = append(del, store.Change{Key: ob.Key})
	}
	if _, err := st.Commit(ctx, del, &store.Entry{Summary: "delete all"}, 10); err != nil {
		t.Fatal(err)
	}
	again, err := openStore(ctx, o, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if objs, _, err := again.List(ctx); err != nil || len(objs) != 0 {
		t.Fatalf("an emptied store was seeded again: %d objects (%v)", len(objs), err)
	}
}

// lines is a slog handler's output that a test can wait on.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls cond every 10ms until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEtcdUnreachableAtStart: start-up waits for etcd with a log line per
// attempt, connects once etcd is up, and gives up after StartTimeout with
// an error naming the endpoints and what to check.
func TestEtcdUnreachableAtStart(t *testing.T) {
	ctx := t.Context()
	srv := etcdtest.Start(t)
	srv.Stop()
	o := etcdOptions(srv, "/late")
	var out lines
	log := slog.New(slog.NewTextHandler(&out, nil))
	type result struct {
		st  store.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := openStore(ctx, o, xdstype.New(), log)
		done <- result{st, err}
	}()
	waitFor(t, 10*time.Second, "a retry logged", func() bool { return strings.Contains(out.String(), "etcd unreachable at start: retrying") })
	srv.Restart()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("etcd back within the start timeout: %v", r.err)
		}
		r.st.Close()
	case <-time.After(15 * time.Second):
		t.Fatal("start-up did not connect once etcd was back")
	}

	srv.Stop()
	o.Etcd.StartTimeout = time.Second
	began := time.Now()
	_, err := openStore(ctx, o, xdstype.New(), slog.New(slog.DiscardHandler))
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("start-up gave up after %v, beyond its 1s bound", took)
	}
	if err == nil || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), srv.Endpoint()) || !strings.Contains(err.Error(), "check --etcd-endpoints") {
		t.Fatalf("etcd away for good: %v", err)
	}
}

// TestSecretReaderDeniesEtcdKey: a config cannot name the etcd client key
// as a secret, even inside a secret directory.
func TestSecretReaderDeniesEtcdKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "etcd-client.key")
	other := filepath.Join(dir, "tls.key")
	for _, p := range []string{key, other} {
		if err := os.WriteFile(p, []byte("-----BEGIN PRIVATE KEY-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{SecretDirs: []string{dir}, DataDir: t.TempDir(), Etcd: EtcdOptions{Cert: filepath.Join(dir, "etcd-client.crt"), Key: key}, Logger: slog.New(slog.DiscardHandler)}
	r, err := secretReader(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(other); err != nil {
		t.Fatalf("a key in the secret directory: %v", err)
	}
	if b, err := r.Read(key); err == nil {
		t.Fatalf("the etcd client key was read (%d bytes)", len(b))
	}
}

// TestEtcdTLSFilesChecked: any etcd TLS flag turns TLS on, and a file that
// cannot be read fails at once, naming it (no retrying for StartTimeout).
func TestEtcdTLSFilesChecked(t *testing.T) {
	o := Options{Store: StoreEtcd, Etcd: EtcdOptions{Endpoints: []string{"127.0.0.1:1"}, CA: filepath.Join(t.TempDir(), "missing-ca.pem"), StartTimeout: time.Minute}}
	began := time.Now()
	_, err := openStore(t.Context(), o, xdstype.New(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "missing-ca.pem") || time.Since(began) > 5*time.Second {
		t.Fatalf("an unreadable --etcd-ca: %v after %v", err, time.Since(began))
	}
}
