package configstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/model"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// On bolt the runner reads again only the keys written since its last
// read (runner.read): every update it sends still holds exactly the
// files a read of every object gives, write after write of every kind: a
// registration, a renewal that moves a lease (no new revision), a
// re-registration that changes an endpoint, a deregistration, a config
// commit, a lease run out and expired, a rollback.
func TestRunnerRereadsWrittenKeys(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newServiceWith(t, Options{Now: clk.Now, Debounce: time.Millisecond, Probe: time.Hour})
	ctx := t.Context()
	first := withWeb(t, s)
	out := running(t, s)
	check := func(what string) {
		t.Helper()
		var u source.Update
		select {
		case u = <-out:
		case <-time.After(waitBound):
			t.Fatalf("%s: no update within %v", what, waitBound)
		}
		objs, _, err := s.opts.Store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Files(objs, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, u.Files); diff != "" {
			t.Fatalf("%s: the update differs from the stored objects' files (-want +got):\n%s", what, diff)
		}
	}
	register := func(what string, e model.Endpoint, ttl time.Duration) {
		t.Helper()
		if _, err := s.Register(ctx, "web", e, ttl); err != nil {
			t.Fatal(err)
		}
		check(what)
	}
	check("the first update")
	a, b, c := model.Endpoint{Address: "10.0.0.5", Port: 80}, model.Endpoint{Address: "10.0.0.6", Port: 80}, model.Endpoint{Address: "10.0.0.7", Port: 80}
	register("a registered", a, time.Minute)
	register("b registered", b, time.Hour)
	// a's lease renewed (stored as it was: only its lease moves), then
	// past its first lease: a read that missed the renewal leaves a out.
	clk.Add(50 * time.Second)
	if _, err := s.Register(ctx, "web", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Second)
	register("c registered after a's renewal", c, 0)
	b.Weight = 7
	register("b re-registered with a weight", b, time.Hour)
	if _, err := s.Deregister(ctx, "web", c.Address, c.Port); err != nil {
		t.Fatal(err)
	}
	check("c deregistered")
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 81)}}, "web", false); err != nil {
		t.Fatal(err)
	}
	check("the service changed")
	clk.Add(time.Minute)
	if err := s.expire(ctx); err != nil {
		t.Fatal(err)
	}
	check("a expired")
	if _, err := s.Rollback(ctx, first.Revision, false); err != nil {
		t.Fatal(err)
	}
	check("rolled back")
}

// runner.read, reading again only the keys written since, gives what a
// List gives, in its order, after batches of writes in no order: new keys
// before, between and after the kept ones, changed ones, removed ones,
// another kind, and keys written and removed within one batch.
func TestRunnerReadMatchesList(t *testing.T) {
	s := newServiceWith(t, Options{})
	ctx := t.Context()
	withWeb(t, s)
	r := &runner{s: s}
	check := func(what string) {
		t.Helper()
		readAsList(t, r, what)
	}
	ep := func(i int) model.Endpoint {
		return model.Endpoint{Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250), Port: 80}
	}
	register := func(is ...int) {
		t.Helper()
		for _, i := range is {
			if _, err := s.Register(ctx, "web", ep(i), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	deregister := func(is ...int) {
		t.Helper()
		for _, i := range is {
			if _, err := s.Deregister(ctx, "web", ep(i).Address, 80); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("the first read")
	register(50, 7, 300, 12)
	check("four registered")
	register(3, 60, 1000, 8, 51)
	check("before, between and after")
	deregister(7, 1000)
	register(9)
	check("two removed, one added")
	if _, err := s.Register(ctx, "web", model.Endpoint{Address: ep(60).Address, Port: 80, Weight: 5}, time.Hour); err != nil {
		t.Fatal(err)
	}
	register(50) // renewed
	check("one changed, one renewed")
	register(2000)
	deregister(2000, 3)
	if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "routes", Name: "r"}, Body: []byte(`{"name":"r","virtual_hosts":[{"name":"v","domains":["*"],"routes":[{"to":[{"service":"web"}]}]}]}`)}}, "r", false); err != nil {
		t.Fatal(err)
	}
	check("added and removed in one batch, another kind")
	var many []int
	for i := range 60 {
		many = append(many, 3000+i*7%60)
	}
	register(many...)
	check("sixty registered")
	deregister(many[:40]...)
	register(4000, 2999)
	check("forty removed in one batch, two added")
}

// The endpoints the runner hands over decoded (config.File's Endpoints)
// load as the file's text does, read after read while the rendering
// reuses the items of the last: the same endpoints, files and lines.
func TestRenderedEndpointsLoadAsTheirText(t *testing.T) {
	reg := xdstype.New()
	now := time.Unix(1_000_000, 0)
	objs := []store.Object{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}
	ep := func(body string) store.Object {
		return store.Object{Key: store.Key{Kind: "endpoints.web", Name: body}, Body: []byte(body)}
	}
	var r rendered
	for _, add := range [][]store.Object{
		{ep(`{"address": "10.0.0.2", "port": 81}`), ep(`{"address": "::1", "port": 82, "weight": 3, "zone": "z", "health": "draining"}`)},
		{ep(`{"address": "10.0.0.3", "port": 83, "region": "r", "sub_zone": "s", "priority": 2}`)},
		{ep(`{"address": "a<b.example", "port": 84}`), ep(`{"ADDRESS": "10.0.0.4", "port": 85, "unknown": true}`)},
	} {
		objs = append(objs, add...)
		files, err := r.files(append([]store.Object(nil), objs...), now)
		if err != nil {
			t.Fatal(err)
		}
		text := make([]config.File, len(files))
		decoded := 0
		for i, f := range files {
			decoded += len(f.Endpoints)
			f.Endpoints = nil
			text[i] = f
		}
		if decoded != len(objs)-1 {
			t.Fatalf("%d endpoints handed over decoded, want %d", decoded, len(objs)-1)
		}
		want, err := config.Load(reg, text)
		if err != nil {
			t.Fatal(err)
		}
		got, err := config.Load(reg, files)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Endpoints, got.Endpoints); diff != "" {
			t.Fatalf("the decoded endpoints differ from their text's (-text +decoded):\n%s", diff)
		}
		// Both as the stored bodies say, in the order read.
		var bodies []config.Endpoint
		for i, o := range objs[1:] {
			e := config.Endpoint{Service: "web", File: "endpoints/web", Line: i + 1}
			if err := json.Unmarshal(o.Body, &e.Endpoint); err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, e)
		}
		if diff := cmp.Diff(bodies, got.Endpoints); diff != "" {
			t.Fatalf("the endpoints differ from the stored bodies (-stored +loaded):\n%s", diff)
		}
	}
}

// A registration is checked against its service's own endpoints as the
// service is now, though they are remembered between registrations: after
// the service changes, an address it took over is refused and one it gave
// up is taken.
func TestRegisterSeesServiceChanges(t *testing.T) {
	s := newServiceWith(t, Options{})
	ctx := t.Context()
	put := func(own string) {
		t.Helper()
		body := fmt.Appendf(nil, `{"name":"web","endpoints":[{"address":%q,"port":80}]}`, own)
		if _, err := s.Commit(ctx, []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: body}}, "web", false); err != nil {
			t.Fatal(err)
		}
	}
	register := func(addr string) error {
		_, err := s.Register(ctx, "web", model.Endpoint{Address: addr, Port: 80}, 0)
		return err
	}
	put("10.0.0.1")
	if err := register("10.0.0.1"); err == nil || !strings.Contains(err.Error(), "own endpoints") {
		t.Fatalf("registering the service's own endpoint: %v", err)
	}
	if err := register("10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	put("10.0.0.3")
	if err := register("10.0.0.3"); err == nil || !strings.Contains(err.Error(), "own endpoints") {
		t.Fatalf("registering the endpoint the service took over: %v", err)
	}
	if err := register("10.0.0.1"); err != nil {
		t.Fatalf("registering the endpoint the service gave up: %v", err)
	}
}

// The keys noted for the runner are bounded: past maxReread only "more"
// is kept, and the runner's next read then lists every object rather
// than trusting what it kept.
func TestWrittenKeysBounded(t *testing.T) {
	var w written
	for i := range maxReread + 1 {
		w.markKey(store.Key{Kind: "endpoints.web", Name: fmt.Sprint(i)})
	}
	if keys, all := w.take(); !all || len(keys) != 0 {
		t.Fatalf("past the bound: %d keys, all %v; want none and all", len(keys), all)
	}
	w.markKey(store.Key{Kind: "endpoints.web", Name: "x"})
	if keys, all := w.take(); all || len(keys) != 1 {
		t.Fatalf("after a take: %d keys, all %v; want 1 and not all", len(keys), all)
	}

	s := newServiceWith(t, Options{})
	withWeb(t, s)
	r := &runner{s: s, stored: []store.Object{}} // kept, and wrong
	s.written.take()
	s.written.more = true
	readAsList(t, r, "after more keys than the bound")
}

// readAsList fails unless what r reads now is what a List of its store
// gives.
func readAsList(t *testing.T, r *runner, what string) {
	t.Helper()
	got, _, err := r.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := r.s.opts.Store.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: read differs from List (-List +read):\n%s", what, diff)
	}
}

// failingGets is a store whose Get fails while fail is set.
type failingGets struct {
	store.Store
	fail atomic.Bool
}

func (f *failingGets) Get(ctx context.Context, k store.Key) (store.Object, error) {
	if f.fail.Load() {
		return store.Object{}, errors.New("get failed")
	}
	return f.Store.Get(ctx, k)
}

// A read that fails loses no write: the keys it took are gone, so the
// next read lists the whole store, and holds the registration the failed
// read did not get.
func TestRunnerReadAfterFailedReadLosesNoWrite(t *testing.T) {
	st := newBolt(t)
	fs := &failingGets{Store: st}
	s := New(Options{Store: fs, Registry: xdstype.New()})
	withWeb(t, s)
	r := &runner{s: s}
	readAsList(t, r, "the first read")
	if _, err := s.Register(t.Context(), "web", model.Endpoint{Address: "10.1.0.1", Port: 80}, 0); err != nil {
		t.Fatal(err)
	}
	fs.fail.Store(true)
	if _, _, err := r.read(t.Context()); err == nil {
		t.Fatal("a read whose Get fails succeeded")
	}
	fs.fail.Store(false)
	readAsList(t, r, "the read after a failed one")
}
