package compile

import (
	"fmt"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// fleetSummary is every resource a fleet serves, by group, type and name,
// with its version, and where it was written.
func fleetSummary(f *fleet.Fleet) map[string]string {
	out := map[string]string{}
	for _, g := range f.Groups() {
		for _, set := range g.Snapshot.Sets() {
			for _, name := range set.Names() {
				out[g.Name+" "+set.Type().Kind+" "+name] = set.Get(name).Version
			}
		}
	}
	return out
}

// TestCacheCompilesAsWithout: compiles through a Cache serve what compiles
// without one do, change after change: an endpoint moved, a service's
// settings changed (its Cluster), a service renamed, one made invalid
// and repaired, a service moved to another file. A cache that reused a
// service's translation when the service changed serves the old one.
func TestCacheCompilesAsWithout(t *testing.T) {
	reg := xdstype.New()
	svc := func(name, extra string) string {
		return fmt.Sprintf(`{"services": [{"name": %q, "endpoints": [{"address": "10.0.0.1", "port": 80}]%s}]}`, name, extra)
	}
	route := config.File{Path: "routes/r", Data: []byte(`{"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "a"}]}]}]}]}`)}
	steps := []struct {
		name    string
		files   []config.File
		refused bool
	}{
		{"first", []config.File{{Path: "services/a", Data: []byte(svc("a", ""))}, {Path: "services/b", Data: []byte(svc("b", ""))}, route}, false},
		{"endpoint moved", []config.File{{Path: "services/a", Data: []byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.2", "port": 80}]}]}`)}, {Path: "services/b", Data: []byte(svc("b", ""))}, route}, false},
		{"endpoint's weight", []config.File{{Path: "services/a", Data: []byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.2", "port": 80, "weight": 3}]}]}`)}, {Path: "services/b", Data: []byte(svc("b", ""))}, route}, false},
		{"cluster settings", []config.File{{Path: "services/a", Data: []byte(svc("a", `, "lb": "least_request", "connect_timeout": "3s"`))}, {Path: "services/b", Data: []byte(svc("b", ""))}, route}, false},
		{"renamed", []config.File{{Path: "services/a", Data: []byte(svc("a", ""))}, {Path: "services/c", Data: []byte(svc("c", ""))}, route}, false},
		{"invalid", []config.File{{Path: "services/a", Data: []byte(svc("a", `, "connect_timeout": "-3s"`))}, {Path: "services/c", Data: []byte(svc("c", ""))}, route}, true},
		{"repaired", []config.File{{Path: "services/a", Data: []byte(svc("a", ""))}, {Path: "services/c", Data: []byte(svc("c", ""))}, route}, false},
		{"moved to one file", []config.File{{Path: "all", Data: []byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80}]}, {"name": "c", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`)}, route}, false},
	}
	var c Cache
	for _, s := range steps {
		got, gotErr := c.Compile(reg, s.files, nil)
		want, wantErr := Compile(reg, s.files, nil)
		if (gotErr != nil) != s.refused || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: error %v, want %v (refused: %v)", s.name, gotErr, wantErr, s.refused)
		}
		if s.refused {
			continue
		}
		if got.Version() != want.Version() {
			t.Errorf("%s: fleet version %s through the cache, %s without", s.name, got.Version(), want.Version())
		}
		gs, ws := fleetSummary(got), fleetSummary(want)
		if fmt.Sprint(gs) != fmt.Sprint(ws) {
			t.Errorf("%s: through the cache serves\n%v\nwithout\n%v", s.name, gs, ws)
		}
	}
}

// TestCacheReusesUnchangedServices: an unchanged service's resources are
// the very messages of the previous compile (not translated, encoded and
// hashed again); a changed one's are new.
func TestCacheReusesUnchangedServices(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	first, err := c.Compile(reg, churnFiles(-1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Compile(reg, churnFiles(7, 9999), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(f *fleet.Fleet, typeURL, name string) any {
		return f.Groups()[0].Snapshot.Set(typeURL).Get(name).Message
	}
	for _, typeURL := range []string{xdstype.ClusterURL, xdstype.EndpointURL} {
		if msg(first, typeURL, "svc-1") != msg(second, typeURL, "svc-1") {
			t.Errorf("%s of an unchanged service translated again", typeURL)
		}
	}
	if msg(first, xdstype.EndpointURL, "svc-7") == msg(second, xdstype.EndpointURL, "svc-7") {
		t.Error("the changed service's assignment was not translated again")
	}
}
