package configstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// waitBound bounds every wait in these tests: etcd on loopback answers in
// milliseconds, a lease runs out within a couple of seconds.
const waitBound = 15 * time.Second

// shared is the etcd store as the daemon will open it, plus the hooks the
// tests need: gate, when armed, runs inside the next List (after the
// read). ExpiresLeases says what the etcd store does (its leases are
// etcd's), so that the service runs no expiry of its own and these tests
// show etcd's expiry alone reaching every replica.
type shared struct {
	*etcd.Store
	mu   sync.Mutex
	gate func()
}

func (s *shared) ExpiresLeases() bool { return true }

func (s *shared) List(ctx context.Context) ([]store.Object, int64, error) {
	objs, rev, err := s.Store.List(ctx)
	s.mu.Lock()
	g := s.gate
	s.gate = nil
	s.mu.Unlock()
	if g != nil {
		g()
	}
	return objs, rev, err
}

func (s *shared) arm(g func()) { s.mu.Lock(); s.gate = g; s.mu.Unlock() }

// replica is a running Service on a shared store and what its pipeline
// was last sent.
type replica struct {
	name  string
	svc   *Service
	st    *shared
	mu    sync.Mutex
	last  source.Update
	count int
	logs  lockedBuffer
}

// lockedBuffer is a log sink the test reads while the service writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines whose msg is msg.
func (b *lockedBuffer) lines(msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// startReplica runs a Service on prefix of srv until the test ends; a
// collector stands for the pipeline and keeps the last update.
func startReplica(t *testing.T, srv *etcdtest.Server, name, prefix string, timeout time.Duration) *replica {
	t.Helper()
	st := &shared{Store: srv.Open(t, prefix, timeout)}
	r := &replica{name: name, st: st}
	r.svc = New(Options{Store: st, Registry: xdstype.New(), Debounce: 20 * time.Millisecond, Probe: 50 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&r.logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan source.Update)
	done := make(chan error, 1)
	go func() { done <- r.svc.Run(ctx, out) }()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case u := <-out:
				r.mu.Lock()
				r.last, r.count = u, r.count+1
				r.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica %s: Run: %v", name, err)
		}
		<-collected
	})
	return r
}

// seen returns the last update sent to the pipeline and how many were.
func (r *replica) seen() (source.Update, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.count
}

// file returns the content of the file named path in the last update.
func (r *replica) file(path string) (string, bool) {
	u, _ := r.seen()
	return fileIn(u.Files, path)
}

func fileIn(files []config.File, path string) (string, bool) {
	for _, f := range files {
		if f.Path == path {
			return string(f.Data), true
		}
	}
	return "", false
}

// waitFor polls cond, bounded: what is awaited (another replica's
// pipeline update, a lease etcd expires) happens in other goroutines and
// in etcd, with no event of the test's own to wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", waitBound, what)
		}
		<-tick.C
	}
}

var web = store.Key{Kind: "services", Name: "web"}

// TestReplicaWriteReachesOther: a commit through replica A reaches
// replica B's pipeline (B's watch), and so does a deletion.
func TestReplicaWriteReachesOther(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/fleet", 0)
	b := startReplica(t, srv, "b", "/fleet", 0)
	ctx := t.Context()
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: web, Body: service("web", 8080)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's pipeline gets A's write", func() bool {
		f, ok := b.file("services/web")
		return ok && strings.Contains(f, "8080")
	})
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: web}}, "no web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's pipeline gets A's deletion", func() bool { _, ok := b.file("services/web"); return !ok })
}

// route names service in its only route.
func route(name, service string) []byte {
	return fmt.Appendf(nil, `{"name":%q,"virtual_hosts":[{"name":"all","domains":["*"],"routes":[{"to":[{"service":%q}]}]}]}`, name, service)
}

// TestReplicasConflictingWrites: A deletes service web while B adds a
// route to it, both validated against the same read (each valid alone,
// broken together). Exactly one is stored; the other is validated again
// on a fresh read and refused as invalid, and the stored config compiles.
func TestReplicasConflictingWrites(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/race", 0)
	b := startReplica(t, srv, "b", "/race", 0)
	ctx := t.Context()
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: web, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B has web", func() bool { _, ok := b.file("services/web"); return ok })
	// Both commits read before either writes: each waits in its List
	// until the other has read too.
	var read sync.WaitGroup
	read.Add(2)
	gate := func() { read.Done(); read.Wait() }
	a.st.arm(gate)
	b.st.arm(gate)
	errs := make(chan error, 2)
	go func() {
		_, err := a.svc.Commit(ctx, []store.Change{{Key: web}}, "delete web", false)
		errs <- err
	}()
	go func() {
		_, err := b.svc.Commit(ctx, []store.Change{{Key: store.Key{Kind: "routes", Name: "r"}, Body: route("r", "web")}}, "route to web", false)
		errs <- err
	}()
	var failed []error
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				failed = append(failed, err)
			}
		case <-time.After(waitBound):
			t.Fatal("the commits did not return")
		}
	}
	if len(failed) != 1 {
		t.Fatalf("want exactly one commit refused, got %v", failed)
	}
	var ve *ValidationError
	if !errors.As(failed[0], &ve) || !strings.Contains(failed[0].Error(), "web") {
		t.Fatalf("the loser should be validated again and refused naming web: %v", failed[0])
	}
	objs, _, err := a.svc.Store().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.compileObjects(objs); err != nil {
		t.Fatalf("the stored config does not compile: %v", err)
	}
}

// rawListener is a Listener on 0.0.0.0:port.
func rawListener(name string, port int) []byte {
	return fmt.Appendf(nil, `{"@type":"type.googleapis.com/envoy.config.listener.v3.Listener","name":%q,"address":{"socketAddress":{"address":"0.0.0.0","portValue":%d}}}`, name, port)
}

// TestReplicasFirstCommitsConflict: on a store no one has written yet
// (revision 0), two replicas' first commits, each valid alone but two
// listeners on one port together, are guarded too: one is stored, the
// other validated again and refused.
func TestReplicasFirstCommitsConflict(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/fresh", 0)
	b := startReplica(t, srv, "b", "/fresh", 0)
	ctx := t.Context()
	waitFor(t, "both replicas read the empty store", func() bool { _, na := a.seen(); _, nb := b.seen(); return na > 0 && nb > 0 })
	var read sync.WaitGroup
	read.Add(2)
	gate := func() { read.Done(); read.Wait() }
	a.st.arm(gate)
	b.st.arm(gate)
	errs := make(chan error, 2)
	for _, c := range []struct {
		r    *replica
		name string
	}{{a, "l1"}, {b, "l2"}} {
		go func() {
			_, err := c.r.svc.Commit(ctx, []store.Change{{Key: store.Key{Kind: "resources.Listener", Name: c.name}, Body: rawListener(c.name, 8080)}}, c.name, false)
			errs <- err
		}()
	}
	var failed []error
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				failed = append(failed, err)
			}
		case <-time.After(waitBound):
			t.Fatal("the commits did not return")
		}
	}
	var ve *ValidationError
	if len(failed) != 1 || !errors.As(failed[0], &ve) || !strings.Contains(failed[0].Error(), "also the address of Listener") {
		t.Fatalf("want one commit refused for the listener clash, got %v", failed)
	}
}

// TestReplicaLeases: an endpoint registered with a TTL through A and
// renewed through B outlives its TTL; left alone, etcd expires it and B's
// pipeline sees it go (neither service runs an expiry of its own here).
func TestReplicaLeases(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/leases", 0)
	b := startReplica(t, srv, "b", "/leases", 0)
	ctx := t.Context()
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: web, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	ep := model.Endpoint{Address: "10.0.0.7", Port: 8080}
	const ttl = time.Second
	first, err := a.svc.Register(ctx, "web", ep, ttl)
	if err != nil {
		t.Fatal(err)
	}
	registered := func() bool { f, _ := b.file("endpoints/web"); return strings.Contains(f, "10.0.0.7") }
	waitFor(t, "B's pipeline gets the registration made through A", registered)
	// Renewed through B for more than twice the TTL: it stays.
	start := time.Now()
	renew := time.NewTicker(ttl / 3)
	for time.Since(start) < 5*ttl/2 {
		<-renew.C
		if _, err := b.svc.Register(ctx, "web", ep, ttl); err != nil {
			t.Fatalf("renewing through B: %v", err)
		}
	}
	renew.Stop()
	// Renewed, not registered anew after running out: still the object
	// the first registration wrote.
	if o, err := a.svc.Store().Get(ctx, endpointKey("web", ep)); err != nil || o.Revision != first.Revision || !registered() {
		t.Fatalf("the endpoint renewed through B did not stay (after %v: revision %d, first %d): %v", time.Since(start), o.Revision, first.Revision, err)
	}
	waitFor(t, "the unrenewed endpoint leaves B's pipeline", func() bool { return !registered() })
	if _, err := a.svc.Store().Get(ctx, endpointKey("web", ep)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the expired endpoint is still stored: %v", err)
	}
	// Both replicas log the expiry etcd made (issue 13 item 7); A, the
	// replica it was registered through, says for how long.
	for _, r := range []*replica{a, b} {
		waitFor(t, r.name+" logs the expiry", func() bool { return len(r.logs.lines("endpoint lease expired")) == 1 })
		line := r.logs.lines("endpoint lease expired")[0]
		if line["service"] != "web" || line["address"] != "10.0.0.7:8080" {
			t.Errorf("%s logged %v", r.name, line)
		}
	}
	line := a.logs.lines("endpoint lease expired")[0]
	if d, err := time.ParseDuration(fmt.Sprint(line["registered_for"])); err != nil || d < 2*ttl {
		t.Errorf("A says the endpoint was registered for %v", line["registered_for"])
	}
}

// TestReplicasEtcdDown: with etcd stopped, writes and registrations are
// refused with ErrUnavailable, both replicas say degraded and why, and
// their pipelines get nothing (the last good config keeps serving). Once
// etcd is back, degraded clears without a write, nothing of the refused
// writes is stored, and a write through A reaches B.
func TestReplicasEtcdDown(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/down", 300*time.Millisecond)
	b := startReplica(t, srv, "b", "/down", 300*time.Millisecond)
	ctx := t.Context()
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: web, Body: service("web", 80)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B has web", func() bool { _, ok := b.file("services/web"); return ok })
	if d, why := b.svc.Degraded(); d {
		t.Fatalf("degraded with etcd up: %s", why)
	}
	good, sent := b.seen()

	srv.Stop()
	api := store.Key{Kind: "services", Name: "api"}
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: api, Body: service("api", 81)}}, "api", false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write with etcd down: %v", err)
	}
	if _, err := a.svc.Register(ctx, "web", model.Endpoint{Address: "10.0.0.9", Port: 80}, time.Minute); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a registration with etcd down: %v", err)
	}
	for _, r := range []*replica{a, b} {
		waitFor(t, r.name+" says degraded", func() bool { d, _ := r.svc.Degraded(); return d })
		if _, why := r.svc.Degraded(); !strings.Contains(why, "store unreachable since ") || !strings.Contains(why, "etcd unreachable at "+srv.Endpoint()) {
			t.Errorf("%s: degraded, but says: %s", r.name, why)
		}
	}
	if _, err := b.svc.Current(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("reading with etcd down: %v", err)
	}
	// B keeps probing (every 50ms) and reading while etcd is away; its
	// pipeline must get nothing from it, least of all an empty config.
	if last, n := b.seen(); n != sent || !sameFiles(last.Files, good.Files) {
		t.Fatalf("B's pipeline got %d updates while etcd was down: %+v", n-sent, last)
	}

	srv.Restart()
	for _, r := range []*replica{a, b} {
		waitFor(t, r.name+" no longer degraded once etcd is back", func() bool { d, _ := r.svc.Degraded(); return !d })
	}
	if _, err := b.svc.Store().Get(ctx, api); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the write refused while etcd was down is stored: %v", err)
	}
	if _, err := a.svc.Commit(ctx, []store.Change{{Key: api, Body: service("api", 81)}}, "api", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B's pipeline gets A's write after the restart", func() bool { _, ok := b.file("services/api"); return ok })
}

func sameFiles(a, b []config.File) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Path != b[i].Path || string(a[i].Data) != string(b[i].Data) {
			return false
		}
	}
	return true
}

// TestRevalidationBounded: a commit that finds the store changed after
// its read every time (another replica committing without pause) is
// validated again a bounded number of times, then refused as a conflict
// that says why; it never loops on.
func TestRevalidationBounded(t *testing.T) {
	srv := etcdtest.Start(t)
	st := &shared{Store: srv.Open(t, "/busy", 0)}
	other := srv.Open(t, "/busy", 0)
	s := New(Options{Store: st, Registry: xdstype.New()})
	ctx := t.Context()
	reads := 0
	var busy func()
	busy = func() {
		// The other replica commits between this read and the
		// commit; it stops after twice the bound, so that an
		// unbounded retry would end up succeeding (and fail this test).
		reads++
		if reads > 2*maxRevalidations {
			return
		}
		k := store.Key{Kind: "services", Name: fmt.Sprint("other", reads)}
		if _, err := other.Commit(ctx, []store.Change{{Key: k, Body: service(k.Name, 80)}}, nil, 0); err != nil {
			t.Error(err)
		}
		st.arm(busy)
	}
	st.arm(busy)
	_, err := s.Commit(ctx, []store.Change{{Key: web, Body: service("web", 80)}}, "web", false)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), fmt.Sprintf("validated %d times", maxRevalidations)) {
		t.Fatalf("a commit outpaced every time: %v", err)
	}
	if reads != maxRevalidations {
		t.Fatalf("validated %d times, want %d", reads, maxRevalidations)
	}
	if _, err := st.Get(ctx, web); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused commit is stored: %v", err)
	}
}

// TestReplicasWritingBackToBack: two replicas committing unconditional
// writes as fast as they can (as two operators' scripts would) keep
// outpacing each other's validation. Without the random wait between
// revalidations 8 to 10 of 80 writes were refused as conflicts; with it,
// at most one has been seen (a writer that never pauses can still starve
// the other: only a lock would close that, see maxRevalidations), so the
// bound here is 3.
func TestReplicasWritingBackToBack(t *testing.T) {
	srv := etcdtest.Start(t)
	a := startReplica(t, srv, "a", "/busy2", 0)
	b := startReplica(t, srv, "b", "/busy2", 0)
	ctx := t.Context()
	const writes = 40
	errs := make(chan error, 2*writes)
	var wg sync.WaitGroup
	for _, r := range []*replica{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				k := store.Key{Kind: "services", Name: fmt.Sprintf("%s-%d", r.name, i)}
				_, err := r.svc.Commit(ctx, []store.Change{{Key: k, Body: service(k.Name, 80)}}, k.Name, false)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	conflicts := 0
	for err := range errs {
		switch {
		case errors.Is(err, ErrConflict):
			conflicts++
		case err != nil:
			t.Fatal(err)
		}
	}
	if conflicts > 3 {
		t.Fatalf("%d of %d unconditional writes refused as conflicts", conflicts, 2*writes)
	}
}
