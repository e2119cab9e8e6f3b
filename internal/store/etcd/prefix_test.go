package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/pylon-xds/pylon/internal/store"
)

// fleetState is what one fleet reads of itself: its objects, history and
// fleet status.
type fleetState struct {
	objects  []string
	history  []string
	replicas []string
}

func readFleet(t *testing.T, s *Store) fleetState {
	t.Helper()
	ctx := context.Background()
	var st fleetState
	objs, _, err := s.List(ctx)
	if err != nil {
		t.Fatalf("%s: list: %v", s.prefix, err)
	}
	for _, o := range objs {
		st.objects = append(st.objects, o.Kind+"/"+o.Name+"="+string(o.Body))
	}
	h, err := s.History(ctx)
	if err != nil {
		t.Fatalf("%s: history: %v", s.prefix, err)
	}
	for _, e := range h {
		st.history = append(st.history, e.Summary)
	}
	boards, err := s.Boards(ctx)
	if err != nil {
		t.Fatalf("%s: fleet status: %v", s.prefix, err)
	}
	for r := range boards {
		st.replicas = append(st.replicas, r)
	}
	slices.Sort(st.replicas)
	return st
}

// writeFleet gives a fleet one object, one history entry and one
// replica's status, all named after it.
func writeFleet(t *testing.T, s *Store, name string) int64 {
	t.Helper()
	ctx := context.Background()
	k := store.Key{Kind: "services", Name: name}
	rev, err := s.Commit(ctx, []store.Change{{Key: k, Body: []byte(`"` + name + `"`)}}, &store.Entry{Summary: name}, 10)
	if err != nil {
		t.Fatalf("%s: commit: %v", name, err)
	}
	b := s.Board("replica-"+name, 10*time.Second)
	if err := b.Put(ctx, [][]byte{[]byte(name)}); err != nil {
		t.Fatalf("%s: board: %v", name, err)
	}
	t.Cleanup(func() { _ = b.Revoke(context.Background()) })
	return rev
}

// checkOwn says whether st holds exactly the one fleet's own writes.
func checkOwn(t *testing.T, prefix, name string, st fleetState) {
	t.Helper()
	want := fleetState{objects: []string{"services/" + name + `="` + name + `"`}, history: []string{name}, replicas: []string{"replica-" + name}}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("fleet on %s reads %+v, want only its own %+v", prefix, st, want)
	}
}

// TestNestedEtcdPrefixes: a fleet whose prefix sits inside
// another's must not reach the other's keys. A prefix with a component
// that is one of the store's own sub-namespaces (o, l, v, h, s, meta) would
// put its keys inside the outer fleet's objects, leases, versions, history
// or status: it is refused, naming the component. Any other nested prefix
// is independent of the outer fleet, both ways.
func TestNestedEtcdPrefixes(t *testing.T) {
	ctx := context.Background()
	ms := startCluster(t, 1)
	outer := open(t, ms, "/pylon", 0)
	writeFleet(t, outer, "outer")
	for reserved, component := range map[string]string{
		"/pylon/s": "s", "/pylon/o": "o", "/pylon/h/x": "h", "/pylon/v": "v", "/pylon/l": "l", "/pylon/meta": "meta", "/a/s/b": "s",
	} {
		s, err := Open(ctx, Options{Endpoints: endpoints(ms), Prefix: reserved})
		if err == nil {
			writeFleet(t, s, "inner")
			got := readFleet(t, outer)
			s.Close()
			t.Fatalf("--etcd-prefix %s was accepted: the fleet on /pylon now reads %+v", reserved, got)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("component %q", component)) || !strings.Contains(err.Error(), "--etcd-prefix") {
			t.Errorf("--etcd-prefix %s refused without naming the component %q and the flag: %v", reserved, component, err)
		}
	}
	inner := open(t, ms, "/pylon/staging", 0)
	deeper := open(t, ms, "/pylon/staging/east", 0)
	writeFleet(t, inner, "inner")
	writeFleet(t, deeper, "deeper")
	checkOwn(t, "/pylon", "outer", readFleet(t, outer))
	checkOwn(t, "/pylon/staging", "inner", readFleet(t, inner))
	checkOwn(t, "/pylon/staging/east", "deeper", readFleet(t, deeper))
}

// TestPrefixWithoutSlashNotShared: /pylon and /pylon-staging
// share the characters "/pylon" but no key: every read, watch and write
// of a fleet is inside "<prefix>/", so an etcd role granted "<prefix>/"
// (with --prefix) is all a replica needs, and holds no other fleet's keys.
func TestPrefixWithoutSlashNotShared(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	a, b := open(t, ms, "/pylon", 0), open(t, ms, "/pylon-staging", 0)
	_, from, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := a.Watch(ctx, from)
	writeFleet(t, b, "staging")
	prod := writeFleet(t, a, "prod")
	checkOwn(t, "/pylon", "prod", readFleet(t, a))
	checkOwn(t, "/pylon-staging", "staging", readFleet(t, b))
	// The watch of /pylon saw its own commit, not /pylon-staging's
	// (which came first).
	select {
	case rev := <-events:
		if rev != prod {
			t.Errorf("/pylon's watch reports revision %d, its own commit is at %d", rev, prod)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("/pylon's watch saw nothing")
	}
	// Every key either fleet wrote is under its prefix and a slash.
	resp, err := a.cli.Get(ctx, "/pylon", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if !strings.HasPrefix(k, "/pylon/") && !strings.HasPrefix(k, "/pylon-staging/") {
			t.Errorf("key %q is outside both fleets' <prefix>/", k)
		}
	}
}

// TestRoleOnPrefixWithSlashSuffices: with etcd's access control
// on, a replica whose user holds only the role docs/operations.md gives
// (readwrite on "/pylon/" as a prefix) does everything a replica does:
// commits with history and pruning, leases and their renewal, reads at a
// revision, the watch, fleet status, resealing. So Pylon uses no key
// outside "<prefix>/". The same user cannot open /pylon-staging, which a
// role granted "/pylon" without the slash would cover.
func TestRoleOnPrefixWithSlashSuffices(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := startCluster(t, 1)
	root, err := clientv3.New(clientv3.Config{Endpoints: endpoints(ms), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	steps := []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "pylon"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "pylon", "/pylon/", clientv3.GetPrefixRangeEnd("/pylon/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.RoleAdd(ctx, "loose"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "loose", "/pylon", clientv3.GetPrefixRangeEnd("/pylon"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "pylon", "pylon-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "pylon", "pylon"); return err },
		func() error { _, err := root.UserAdd(ctx, "loose", "loose-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "loose", "loose"); return err },
		func() error { _, err := root.Put(ctx, "/pylon-staging/meta", `{"format":1}`); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	openAs := func(user, prefix string) (*Store, error) {
		s, err := newStore(Options{Endpoints: endpoints(ms), Prefix: prefix, Seal: storetestRing(t)})
		if err != nil {
			return nil, err
		}
		cfg := s.clientConfig(Options{Endpoints: endpoints(ms)})
		cfg.Username, cfg.Password = user, user+"-pw"
		return s.connect(ctx, cfg)
	}
	s, err := openAs("pylon", "/pylon")
	if err != nil {
		t.Fatalf("a replica with readwrite on /pylon/ cannot open /pylon: %v", err)
	}
	t.Cleanup(func() { s.Close() }) // after the boards' revocations
	everything(t, ctx, s)
	if other, err := openAs("pylon", "/pylon-staging"); err == nil {
		other.Close()
		t.Fatal("the role on /pylon/ opened /pylon-staging")
	}
	loose, err := openAs("loose", "/pylon-staging")
	if err != nil {
		t.Fatalf("a role granted /pylon without the slash: %v", err)
	}
	loose.Close() // the advice without the slash covered another fleet
}

// everything is what a replica does with its store, each step failing
// the test on error.
func everything(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	_, from, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := s.Watch(ctx, from)
	for i := range 4 {
		writeFleet(t, s, fmt.Sprint("n", i)) // keep 10: no pruning yet
	}
	k := store.Key{Kind: "services", Name: "n0"}
	for i := range 12 { // past keep: versions pruned
		if _, err := s.Commit(ctx, []store.Change{{Key: k, Body: fmt.Appendf(nil, `%d`, i)}}, &store.Entry{Summary: "p"}, 3); err != nil {
			t.Fatal(err)
		}
	}
	ep := store.Key{Kind: "endpoints.web", Name: "10.0.0.1:80"}
	exp := time.Now().Add(time.Minute)
	if _, err := s.Commit(ctx, []store.Change{{Key: ep, Body: []byte(`{}`), Expires: exp}}, nil, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, ep, exp.Add(time.Second)); err != nil {
		t.Fatalf("touch: %v", err)
	}
	if err := s.Touch(ctx, ep, exp.Add(time.Hour)); err != nil {
		t.Fatalf("touch to a longer lease: %v", err)
	}
	if _, err := s.Commit(ctx, []store.Change{{Key: ep}}, nil, 3); err != nil {
		t.Fatalf("delete a leased object: %v", err)
	}
	h, err := s.History(ctx)
	if err != nil || len(h) != 3 {
		t.Fatalf("history: %d entries, %v", len(h), err)
	}
	if _, err := s.At(ctx, h[2].Revision); err != nil {
		t.Fatalf("at: %v", err)
	}
	if _, err := s.Boards(ctx); err != nil {
		t.Fatalf("fleet status: %v", err)
	}
	if _, err := s.Reseal(ctx); err != nil {
		t.Fatalf("reseal: %v", err)
	}
	select {
	case <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch saw nothing")
	}
}
