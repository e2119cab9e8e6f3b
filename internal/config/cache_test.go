package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		if diff := cmp.Diff(want, got, protocmp.Transform(), cmp.Comparer(func(a, b *xdstype.Type) bool { return a == b })); diff != "" {
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
		for k := range c.prev {
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
