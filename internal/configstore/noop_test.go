package configstore

import (
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A write that changes nothing (an apply of what is stored, the same
// prune again, a rollback to the config that is current) stores nothing:
// no revision, no history entry, so a loop that applies the same config
// every minute does not push the real rollback points out of history. On
// both stores.
func TestWriteThatChangesNothingMakesNoRevision(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"bolt": func(t *testing.T) store.Store { return newBolt(t) },
		"etcd": func(t *testing.T) store.Store { return etcdtest.Start(t).Open(t, "/pylon", 5*time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Store: open(t), Registry: xdstype.New()})
			ctx := t.Context()
			web := store.Change{Key: store.Key{Kind: "services", Name: "web"}, Body: service("web", 80)}
			first, err := s.Commit(ctx, []store.Change{web}, "seed", false)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := ReadDocument(xdstype.New(), []byte(`{"version":1,"services":[{"name":"web","endpoints":[{"address":"10.0.0.1","port":80}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			writes := map[string]func() (Result, error){
				"apply":    func() (Result, error) { return s.Commit(ctx, []store.Change{web}, "again", false) },
				"prune":    func() (Result, error) { return s.Prune(ctx, doc, "prune", false) },
				"rollback": func() (Result, error) { return s.Rollback(ctx, first.Revision, false) },
			}
			for what, write := range writes {
				res, err := write()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if res.Recorded || res.Revision != 0 || !res.Unchanged || len(res.Objects) != 0 {
					t.Errorf("%s of what is stored: %+v; want nothing recorded, no revision, unchanged", what, res)
				}
			}
			h, err := s.Store().History(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != 1 || h[0].Revision != first.Revision {
				t.Errorf("history %+v; want only the seed, revision %d", h, first.Revision)
			}
		})
	}
}
