package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// cacheDoc is a JSON config of every kind of item; extra is spliced into
// the services list, and pretty puts each item on lines of its own (so
// that the same items move to other lines).
func cacheDoc(extra string, pretty bool) []byte {
	nl := ""
	if pretty {
		nl = "\n\n"
	}
	items := []string{
		`"resources": [` + nl + `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "raw", "type": "STATIC", "connect_timeout": "1s"},` + nl +
			`{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "@ttl": "30s", "name": "raw-ttl", "type": "STATIC", "connect_timeout": "2s"}]`,
		`"services": [` + nl + `{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80}]},` + nl + `{"name": "b", "protocol": "http2"}` + extra + `]`,
		`"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "a"}]}]}]}]`,
		`"listeners": [{"name": "l", "port": 8080, "routes": "r"}]`,
		`"groups": [{"name": "g", "default": true, "match": {"metadata": {"team": "x"}}, "scope": {"clusters": ["*"]}}]`,
		`"tests": [{"name": "t", "request": {"url": "http://x/", "listener": "l"}, "expect": {"cluster": "a"}}]`,
	}
	return []byte("{" + nl + `"version": 1,` + nl + strings.Join(items, ","+nl) + nl + "}\n")
}

// TestCacheLoadsAsWithout: a load through the cache returns what a load
// without it does (every field, the file and line of each item included),
// through a change, items moved to other lines and files, a broken item
// and its repair; and an unchanged item is not decoded again (its message
// is the one the cache holds).
func TestCacheLoadsAsWithout(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	steps := []struct {
		name  string
		files []File
	}{
		{"first", []File{{Path: "a.json", Data: cacheDoc("", false)}}},
		{"same again", []File{{Path: "a.json", Data: cacheDoc("", false)}}},
		{"one service added", []File{{Path: "a.json", Data: cacheDoc(`, {"name": "c"}`, false)}}},
		{"moved to other lines", []File{{Path: "a.json", Data: cacheDoc(`, {"name": "c"}`, true)}}},
		{"moved to another file", []File{{Path: "x.json", Data: []byte(`{"version": 1}`)}, {Path: "b.json", Data: cacheDoc(`, {"name": "c"}`, true)}}},
		{"a broken item", []File{{Path: "b.json", Data: cacheDoc(`, {"name": "c", "protocol": 7}`, true)}}},
		{"repaired", []File{{Path: "b.json", Data: cacheDoc(`, {"name": "c"}`, true)}}},
		{"YAML beside", []File{{Path: "b.json", Data: cacheDoc(`, {"name": "c"}`, true)}, {Path: "y.yaml", Data: []byte("services:\n- name: d\n")}}},
		{"not quite JSON", []File{{Path: "b.json", Data: append(cacheDoc(`, {"name": "c"}`, true), '}')}}},
	}
	var first *Document
	for _, s := range steps {
		got, gotErr := c.Load(reg, s.files)
		want, wantErr := Load(reg, s.files)
		if diff := cmp.Diff(want, got, protocmp.Transform(), cmp.Comparer(func(a, b *xdstype.Type) bool { return a == b }), ignoreIdentities); diff != "" {
			t.Errorf("%s: the cached load differs from a plain load (-want +got):\n%s", s.name, diff)
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, want %v", s.name, gotErr, wantErr)
		}
		if first == nil {
			first = got
			if gotErr != nil || len(got.Resources) != 2 || len(got.Services) != 2 {
				t.Fatalf("first load: %v, %+v", gotErr, got)
			}
			continue
		}
		if got != nil && len(got.Resources) > 0 && got.Resources[0].Message != first.Resources[0].Message {
			t.Errorf("%s: the unchanged resource was decoded again", s.name)
		}
	}
	if _, err := c.Load(reg, steps[5].files); err == nil || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("a broken item loaded through the cache: %v", err)
	}
}

// TestCacheForgetsAfterTwoLoads bounds the cache: an item is kept for the
// load after the one that used it, and no longer.
func TestCacheForgetsAfterTwoLoads(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	load := func(extra string) {
		t.Helper()
		if _, err := c.Load(reg, []File{{Path: "a.json", Data: cacheDoc(extra, false)}}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(name string) bool {
		for k := range c.items {
			if k.kind == "service" && strings.Contains(k.text, `"`+name+`"`) {
				return true
			}
		}
		return false
	}
	load(`, {"name": "gone"}`)
	if !has("gone") {
		t.Fatal("an item of the last load is not cached")
	}
	load("")
	if has("gone") {
		t.Error("an item the last load did not use is still cached")
	}
}

func BenchmarkLoadCachedOneChange(b *testing.B) {
	reg := xdstype.New()
	svc := func(i, port int) string {
		return fmt.Sprintf(`{"name": "svc-%d", "endpoints": [{"address": "10.0.%d.%d", "port": %d}]}`, i, i/256%256, i%256, port)
	}
	doc := func(changed int) []byte {
		var parts []string
		for i := range 1000 {
			port := 8080
			if i == changed {
				port = 9090
			}
			parts = append(parts, svc(i, port))
		}
		return []byte(`{"version": 1, "services": [` + strings.Join(parts, ",\n") + "]}")
	}
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			var c *Cache
			if cached {
				c = &Cache{}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := c.Load(reg, []File{{Path: "f.json", Data: doc(i % 1000)}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ignoreIdentities compares Documents loaded with and without a Cache:
// only the former's objects have Identities.
var ignoreIdentities = cmpopts.IgnoreFields(Document{}, "Identities")

// TestIdentitiesFollowTheText: a model object decoded again from the
// same text through one Cache has the same Identity, wherever it is
// written; a changed one, one of a YAML file, and one decoded without a
// Cache have none in common; each list of Identities is as long as its
// objects'.
func TestIdentitiesFollowTheText(t *testing.T) {
	reg := xdstype.New()
	var c Cache
	load := func(c *Cache, files ...File) *Document {
		t.Helper()
		doc, err := c.Load(reg, files)
		if err != nil {
			t.Fatal(err)
		}
		if len(doc.Identities.Services) != len(doc.Services) || len(doc.Identities.Routes) != len(doc.Routes) || len(doc.Identities.Listeners) != len(doc.Listeners) {
			t.Fatalf("identities %d/%d/%d for %d services, %d route tables, %d listeners", len(doc.Identities.Services), len(doc.Identities.Routes),
				len(doc.Identities.Listeners), len(doc.Services), len(doc.Routes), len(doc.Listeners))
		}
		return doc
	}
	svc := func(name string, port int) string {
		return fmt.Sprintf(`{"name": %q, "endpoints": [{"address": "10.0.0.1", "port": %d}]}`, name, port)
	}
	doc := func(items ...string) File {
		return File{Path: "a.json", Data: []byte(`{"services": [` + strings.Join(items, ",\n") + `],
"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "a"}]}]}]}],
"listeners": [{"name": "l", "port": 80, "routes": "r"}]}`)}
	}
	first := load(&c, doc(svc("a", 80), svc("b", 80)))
	for i, id := range append(append(first.Identities.Services, first.Identities.Routes...), first.Identities.Listeners...) {
		if !id.Known() {
			t.Fatalf("object %d of a JSON file loaded through a Cache has no Identity", i)
		}
	}
	// b changed, a moved down a line.
	second := load(&c, doc(svc("b", 81), "\n"+svc("a", 80)))
	if second.Identities.Services[1] != first.Identities.Services[0] || second.Services[1].Source.Line == first.Services[0].Source.Line {
		t.Error("an unchanged service written on another line has another Identity")
	}
	if second.Identities.Services[0] == first.Identities.Services[1] {
		t.Error("a changed service has its old Identity")
	}
	if second.Identities.Routes[0] != first.Identities.Routes[0] || second.Identities.Listeners[0] != first.Identities.Listeners[0] {
		t.Error("an unchanged route table or listener has another Identity")
	}
	yaml := load(&c, File{Path: "y.yaml", Data: []byte("services:\n- name: a\n  endpoints: [{address: 10.0.0.1, port: 80}]\n")})
	uncached := load(nil, doc(svc("a", 80)))
	if yaml.Identities.Services[0].Known() || uncached.Identities.Services[0].Known() {
		t.Error("an object of a YAML file, or loaded without a Cache, has an Identity")
	}
}
