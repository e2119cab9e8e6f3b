package configstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pylon-xds/pylon/internal/store"
)

// TestRenderedFilesAsWithout: the runner's remembered rendering gives the
// files Files gives, read after read: an endpoint registered, a second one,
// one deregistered, a lease run out, the service itself changed, groups
// set; and a file whose object and endpoints did not change is the very
// file of the last read.
func TestRenderedFilesAsWithout(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	svc := func(name, body string) store.Object {
		return store.Object{Key: store.Key{Kind: "services", Name: name}, Body: []byte(body)}
	}
	ep := func(service, addr string, expires time.Time) store.Object {
		return store.Object{Key: store.Key{Kind: "endpoints." + service, Name: addr + ":80"}, Body: []byte(fmt.Sprintf(`{"address": %q, "port": 80}`, addr)), Expires: expires}
	}
	a, b := svc("a", `{"name": "a"}`), svc("b", `{"name": "b", "endpoints": [{"address": "10.0.0.9", "port": 80}]}`)
	steps := []struct {
		name string
		objs []store.Object
		now  time.Time
	}{
		{"services", []store.Object{a, b}, t0},
		{"one registered", []store.Object{a, b, ep("a", "10.0.0.1", time.Time{})}, t0},
		{"two registered", []store.Object{a, b, ep("a", "10.0.0.1", time.Time{}), ep("a", "10.0.0.2", t0.Add(time.Minute))}, t0},
		{"one to b", []store.Object{a, b, ep("a", "10.0.0.1", time.Time{}), ep("a", "10.0.0.2", t0.Add(time.Minute)), ep("b", "10.0.0.3", time.Time{})}, t0},
		{"lease ran out", []store.Object{a, b, ep("a", "10.0.0.1", time.Time{}), ep("a", "10.0.0.2", t0.Add(time.Minute)), ep("b", "10.0.0.3", time.Time{})}, t0.Add(2 * time.Minute)},
		{"deregistered", []store.Object{a, b, ep("b", "10.0.0.3", time.Time{})}, t0.Add(2 * time.Minute)},
		{"service changed", []store.Object{svc("a", `{"name": "a", "lb": "least_request"}`), b, ep("b", "10.0.0.3", time.Time{})}, t0},
		{"groups", []store.Object{a, b, {Key: GroupsKey, Body: []byte(`[{"name": "g", "default": true}]`)}}, t0},
	}
	var r rendered
	var last map[string][]byte
	for _, s := range steps {
		got, err := r.files(append([]store.Object(nil), s.objs...), s.now)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Files(append([]store.Object(nil), s.objs...), s.now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: files differ from Files (-want +got):\n%s", s.name, diff)
		}
		cur := map[string][]byte{}
		for _, f := range got {
			cur[f.Path] = f.Data
		}
		if s.name == "one to b" && &cur["services/a"][0] != &last["services/a"][0] {
			t.Errorf("%s: the unchanged service a was rendered again", s.name)
		}
		last = cur
	}
}
