package configstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/store"
)

// TestWritesAreValidatedWithTheExtraFiles: a route naming a service that
// another source adds (a Kubernetes cluster's) is stored, and the same
// route once that service is gone is refused as a dangling reference.
func TestWritesAreValidatedWithTheExtraFiles(t *testing.T) {
	extra := []config.File{{Path: "kubernetes/cluster/services.json", Data: []byte(`{"services": [
{"name":"shop/web:http","endpoints":[]}
]}`)}}
	s := newServiceWith(t, Options{Keep: 10, Extra: func() []config.File { return extra }})
	table := store.Key{Kind: "routes", Name: "all"}
	if _, err := s.Commit(t.Context(), []store.Change{{Key: table, Body: routesTo("shop/web:http")}}, "route to the cluster's service", false); err != nil {
		t.Fatalf("a route to a service of the extra files: %v", err)
	}
	extra = []config.File{{Path: "kubernetes/cluster/services.json", Data: []byte(`{"services": []}`)}}
	_, err := s.Commit(t.Context(), []store.Change{{Key: table, Body: routesTo("shop/web:http")}}, "again", false)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `no service "shop/web:http"`) {
		t.Fatalf("the route once the service is gone: %v; want it refused naming the service", err)
	}
}
