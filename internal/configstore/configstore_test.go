package configstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/bolt"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newService(t *testing.T, keep int) *Service {
	t.Helper()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(Options{Store: st, Registry: xdstype.New(), Keep: keep})
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
