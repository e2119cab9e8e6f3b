package configstore

import (
	"slices"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A prune replaces a service a route uses with another and the route with
// one to the new service: deleted alone first, the old service would be
// refused (the route uses it), so the whole prune is one commit, one
// revision, validated as a whole; kinds the document does not name, and
// registered endpoints, stay. On both stores.
func TestPruneIsOneRevision(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"bolt": func(t *testing.T) store.Store { return newBolt(t) },
		"etcd": func(t *testing.T) store.Store { return etcdtest.Start(t).Open(t, "/pylon", 5*time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Store: open(t), Registry: xdstype.New()})
			ctx := t.Context()
			if _, err := s.Commit(ctx, []store.Change{
				{Key: store.Key{Kind: "services", Name: "old"}, Body: service("old", 80)},
				{Key: store.Key{Kind: "routes", Name: "all"}, Body: route("all", "old")},
				{Key: store.Key{Kind: "resources.Cluster", Name: "kept"}, Body: []byte(`{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"kept","connect_timeout":"1s"}`)},
			}, "seed", false); err != nil {
				t.Fatal(err)
			}
			before, err := s.Store().History(ctx)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := ReadDocument(xdstype.New(), []byte(`{"version":1,"services":[{"name":"new","endpoints":[{"address":"10.0.0.2","port":80}]}],
				"routes":[{"name":"all","virtual_hosts":[{"name":"all","domains":["*"],"routes":[{"to":[{"service":"new"}]}]}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			dry, err := s.Prune(ctx, doc, "prune", true)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"~ routes/all", "+ services/new", "- services/old"}; !slices.Equal(dry.Objects, want) {
				t.Errorf("dry run objects %q, want %q", dry.Objects, want)
			}
			res, err := s.Prune(ctx, doc, "prune", false)
			if err != nil {
				t.Fatal(err)
			}
			after, err := s.Store().History(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before)+1 || after[0].Revision != res.Revision {
				t.Errorf("history %d -> %d entries, newest %+v; want one more, at revision %d", len(before), len(after), after[0], res.Revision)
			}
			// The same prune again changes nothing: no object is written.
			again, err := s.Prune(ctx, doc, "prune", false)
			if err != nil || len(again.Objects) != 0 {
				t.Errorf("the same prune again: %+v, %v; want no object changed", again, err)
			}
			objs, _, err := s.Store().List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Kind+"/"+o.Name)
			}
			slices.Sort(keys)
			if want := []string{"resources.Cluster/kept", "routes/all", "services/new"}; !slices.Equal(keys, want) {
				t.Errorf("stored %q, want %q", keys, want)
			}
		})
	}
}
