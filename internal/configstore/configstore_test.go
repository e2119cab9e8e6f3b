package configstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/source"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newService(t *testing.T, keep int) *Service {
	t.Helper()
	return newServiceWith(t, Options{Keep: keep})
}

// newBolt opens an embedded store in a new folder, closed when the test
// ends.
func newBolt(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newServiceWith is a Service with opts over a new embedded store (Store
// and Registry filled in).
func newServiceWith(t *testing.T, opts Options) *Service {
	t.Helper()
	st := newBolt(t)
	opts.Store, opts.Registry = st, xdstype.New()
	return New(opts)
}

// withWeb commits one service, web, to s.
func withWeb(t *testing.T, s *Service) Result {
	t.Helper()
	res, err := s.Commit(t.Context(), []store.Change{{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}}, "web", false)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// running runs s until the test ends and returns its updates.
func running(t *testing.T, s *Service) <-chan source.Update {
	t.Helper()
	out := make(chan source.Update)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func service(name string, port int) []byte {
	return fmt.Appendf(nil, `{"name":%q,"endpoints":[{"address":"10.0.0.1","port":%d}]}`, name, port)
}

// TestRollbackAcrossPruning: with a short history, a rollback to the
// oldest kept revision restores exactly the config of that revision, and a
// pruned one is refused as not found.
func TestRollbackAcrossPruning(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 3)
	web := store.Key{Kind: "services", Name: "web"}
	api := store.Key{Kind: "services", Name: "api"}
	var revs []int64
	for i, changes := range [][]store.Change{
		{{Key: web, Body: service("web", 81)}},
		{{Key: api, Body: service("api", 82)}},
		{{Key: web, Body: service("web", 83)}},
		{{Key: api}}, // delete
		{{Key: web, Body: service("web", 85)}},
	} {
		res, err := s.Commit(ctx, changes, fmt.Sprint("step ", i), false)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		revs = append(revs, res.Revision)
	}
	if _, err := s.Rollback(ctx, revs[1], false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rollback to a pruned revision: %v", err)
	}
	// revs[2] is the oldest kept: web on 83 and api on 82.
	if _, err := s.Rollback(ctx, revs[2], false); err != nil {
		t.Fatal(err)
	}
	objs, _, err := s.Store().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range objs {
		got[o.Name] = string(o.Body)
	}
	if len(got) != 2 || got["web"] != string(service("web", 83)) || got["api"] != string(service("api", 82)) {
		t.Fatalf("after rollback: %v", got)
	}
}

// TestObjectsRefusesDuplicates: one document naming an object twice is
// refused, naming both places, in model lists and raw resources alike.
func TestObjectsRefusesDuplicates(t *testing.T) {
	reg := xdstype.New()
	for doc, want := range map[string][]string{
		`{"services":[{"name":"a"},{"name":"b"},{"name":"a"}]}`: {"services[2]", "services[0]", `"a"`},
		"routes:\n- name: r\n- name: r\n":                       {"routes[1]", "routes[0]"},
		`{"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c"},{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c"}]}`: {"resources[1]", "resources[0]", "resources.Cluster"},
	} {
		_, err := Objects(reg, []byte(doc))
		var dl diag.List
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &dl) {
			t.Fatalf("%s: %v", doc, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not name %s", doc, err, w)
			}
		}
	}
	if _, err := Objects(reg, []byte(`{"services":[{"name":"a"}],"routes":[{"name":"a"}]}`)); err != nil {
		t.Fatalf("the same name in two kinds is fine: %v", err)
	}
}

// countingStore records the changes of each commit.
type countingStore struct {
	store.Store
	commits [][]store.Change
}

func (c *countingStore) Commit(ctx context.Context, changes []store.Change, entry *store.Entry, keep int) (int64, error) {
	c.commits = append(c.commits, changes)
	return c.Store.Commit(ctx, changes, entry, keep)
}

// TestRollbackWritesOnlyDifferences: a rollback writes the objects that
// differ from the target revision, not every object (on etcd a rollback
// must fit in one transaction); what it leaves alone keeps its revision.
func TestRollbackWritesOnlyDifferences(t *testing.T) {
	ctx := t.Context()
	st := newBolt(t)
	cs := &countingStore{Store: st}
	s := New(Options{Store: cs, Registry: xdstype.New()})
	var changes []store.Change
	for i := range 20 {
		name := fmt.Sprint("svc", i)
		changes = append(changes, store.Change{Key: store.Key{Kind: "services", Name: name}, Body: service(name, 80)})
	}
	base, err := s.Commit(ctx, changes, "twenty services", false)
	if err != nil {
		t.Fatal(err)
	}
	svc3 := store.Key{Kind: "services", Name: "svc3"}
	extra := store.Key{Kind: "services", Name: "extra"}
	if _, err := s.Commit(ctx, []store.Change{{Key: svc3, Body: service("svc3", 90)}, {Key: extra, Body: service("extra", 91)}}, "svc3 moved, extra added", false); err != nil {
		t.Fatal(err)
	}
	cs.commits = nil
	if _, err := s.Rollback(ctx, base.Revision, false); err != nil {
		t.Fatal(err)
	}
	if len(cs.commits) != 1 {
		t.Fatalf("%d commits for one rollback", len(cs.commits))
	}
	got := cs.commits[0]
	want := []store.Change{{Key: extra}, {Key: svc3, Body: service("svc3", 80)}}
	if len(got) != len(want) {
		var keys []string
		for _, c := range got {
			keys = append(keys, c.Kind+"/"+c.Name)
		}
		t.Fatalf("rollback wrote %d changes, want %d: %v", len(got), len(want), keys)
	}
	for i := range want {
		if got[i].Key != want[i].Key || string(got[i].Body) != string(want[i].Body) {
			t.Errorf("change %d: %s/%s %s, want %s/%s %s", i, got[i].Kind, got[i].Name, got[i].Body, want[i].Kind, want[i].Name, want[i].Body)
		}
	}
	if o, err := st.Get(ctx, store.Key{Kind: "services", Name: "svc0"}); err != nil || o.Revision != base.Revision {
		t.Fatalf("an object the rollback left alone was rewritten: %+v %v", o, err)
	}
}

// TestRouteTestsGateWrites: route tests are stored objects (tests/NAME),
// and every later write is compiled with them: a write that breaks one is
// refused, naming the test, and nothing is stored.
func TestRouteTestsGateWrites(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 10)
	table := store.Key{Kind: "routes", Name: "all"}
	// As pylon apply sends it: a document, split into objects.
	doc := fmt.Sprintf(`{"services":[%s],"routes":[%s],"listeners":[{"name":"http","port":10000,"routes":"all"}],
		"tests":[{"name":"web-reachable","request":{"url":"http://any.example.com/","port":10000},"expect":{"cluster":"web"}}]}`,
		service("web", 8080), routesTo("web"))
	changes, err := Objects(xdstype.New(), []byte(doc))
	if err != nil {
		t.Fatalf("a document with tests: %v", err)
	}
	test := store.Key{Kind: "tests", Name: "web-reachable"}
	if !slices.ContainsFunc(changes, func(c store.Change) bool { return c.Key == test }) {
		t.Fatalf("the route test is not an object of its own: %v", changes)
	}
	if err := CheckKey(xdstype.New(), test, []byte(`{"name":"web-reachable"}`)); err != nil {
		t.Fatalf("PUT /v1/objects/tests/web-reachable: %v", err)
	}
	if _, err := s.Commit(ctx, changes, "web with a route test", false); err != nil {
		t.Fatalf("a config whose route test passes: %v", err)
	}
	other := routesTo("other")
	_, err = s.Commit(ctx, []store.Change{
		{Key: store.Key{Kind: "services", Name: "other"}, Body: service("other", 8081)},
		{Key: table, Body: other},
	}, "send everything elsewhere", false)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `route test "web-reachable"`) {
		t.Fatalf("a write breaking the route test: %v; want it refused as invalid, naming the test", err)
	}
	objs, _, err := s.Store().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind == "routes" && string(o.Body) == string(other) || o.Name == "other" {
			t.Fatalf("the refused write was stored: %s/%s", o.Kind, o.Name)
		}
	}
}

// routesTo is a route table sending every request to service.
func routesTo(service string) []byte {
	return fmt.Appendf(nil, `{"name":"all","virtual_hosts":[{"name":"any","domains":["*"],"routes":[{"to":[{"service":%q}]}]}]}`, service)
}

// TestObjectsRefusesEndpointsList: apply stores objects, and registered
// endpoints are runtime state with leases: a document's top-level
// endpoints list is refused with where to register them instead.
func TestObjectsRefusesEndpointsList(t *testing.T) {
	_, err := Objects(xdstype.New(), []byte(`{"services":[{"name":"a"}],"endpoints":[{"service":"a","address":"10.0.0.1","port":80}]}`))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "POST /v1/services/NAME/endpoints") {
		t.Fatalf("an endpoints list through apply: %v", err)
	}
}

// A write through the API is checked as a file is: a listener two of
// whose filter chains have the same filter_chain_match is refused (Envoy
// would reject it), naming the listener and the later chain's match, and
// nothing is stored.
func TestWriteRefusesFilterChainsWithTheSameMatch(t *testing.T) {
	s := newService(t, 10)
	chain := `{"filter_chain_match":{"server_names":["a.example.com"]},"filters":[{"name":"envoy.filters.network.tcp_proxy","typed_config":{"@type":"type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy","stat_prefix":"tls","cluster":"web"}}]}`
	doc := fmt.Sprintf(`{"services":[%s],"resources":[{"@type":"type.googleapis.com/envoy.config.listener.v3.Listener","name":"tls",
		"address":{"socket_address":{"address":"0.0.0.0","port_value":443}},"filter_chains":[%s,%s]}]}`, service("web", 8080), chain, chain)
	changes, err := Objects(xdstype.New(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(t.Context(), changes, "two chains, one match", false)
	var dl diag.List
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &dl) {
		t.Fatalf("commit: %v; want it refused as invalid with diagnostics", err)
	}
	found := slices.ContainsFunc(dl, func(d diag.Diagnostic) bool {
		return d.Type == "Listener" && d.Name == "tls" && d.Field == "filter_chains[1].filter_chain_match" && d.File != "" &&
			strings.Contains(d.Message, "multiple filter chains with the same matching rules are defined")
	})
	if !found {
		t.Fatalf("no diagnostic names the listener and the second chain's match:\n%v", dl)
	}
	if objs, _, err := s.Store().List(t.Context()); err != nil || len(objs) != 0 {
		t.Fatalf("the refused write was stored: %v %v", objs, err)
	}
}
