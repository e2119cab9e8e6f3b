package compile

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// modelLists are the top-level lists of model objects a mutation edits.
var modelLists = []string{"services", "routes", "listeners", "secrets", "grpc", "endpoints", "groups"}

// goldenAsJSON is each testdata/compile input that is one YAML document
// of a mapping, as indented JSON (one item a few lines, so that removing
// one moves the others' lines): a JSON file's objects are decoded
// through the Cache item by item, a YAML file's are not.
func goldenAsJSON(t *testing.T) map[string]map[string]any {
	t.Helper()
	dir := filepath.Join("testdata", "compile")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if yaml.Unmarshal(data, &doc) != nil || doc == nil {
			continue
		}
		if _, err := json.Marshal(doc); err != nil {
			continue // a YAML-only form (a map keyed by a number)
		}
		out[strings.TrimSuffix(e.Name(), ".yaml")] = doc
	}
	return out
}

// mutation is one edit of a config's model object.
type mutation struct {
	what string
	doc  map[string]any
}

// mutations are the edits of doc: each model object removed, renamed
// (what names it then names nothing), its durations made negative and
// its port made 0, one at a time, each on a copy of doc.
func mutations(doc map[string]any) []mutation {
	var out []mutation
	for _, key := range modelLists {
		items, _ := doc[key].([]any)
		for i := range items {
			at := fmt.Sprintf("%s[%d]", key, i)
			edit := func(what string, fn func(items []any) bool) {
				c := deepCopy(doc).(map[string]any)
				list := c[key].([]any)
				if fn(list) {
					out = append(out, mutation{at + " " + what, c})
				}
			}
			c := deepCopy(doc).(map[string]any)
			c[key] = slices.Delete(c[key].([]any), i, i+1)
			out = append(out, mutation{at + " removed", c})
			for _, field := range []string{"name", "target", "service"} {
				edit("'s "+field+" renamed", func(list []any) bool {
					obj, ok := list[i].(map[string]any)
					if s, isString := obj[field].(string); ok && isString {
						obj[field] = s + "-renamed"
						return true
					}
					return false
				})
			}
			edit("'s durations negative", func(list []any) bool { return negateDurations(list[i]) })
			edit("'s port 0", func(list []any) bool {
				obj, ok := list[i].(map[string]any)
				if _, has := obj["port"]; ok && has {
					obj["port"] = 0
					return true
				}
				return false
			})
		}
	}
	return out
}

// negateDurations makes every positive duration string in v negative,
// reporting whether there was one.
func negateDurations(v any) bool {
	found := false
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok {
				if d, err := time.ParseDuration(s); err == nil && d > 0 {
					v[k], found = "-"+s, true
				}
				continue
			}
			found = negateDurations(x) || found
		}
	case []any:
		for _, x := range v {
			found = negateDurations(x) || found
		}
	}
	return found
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = deepCopy(x)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, x := range v {
			c[i] = deepCopy(x)
		}
		return c
	}
	return v
}

// TestCachedChecksAgreeWithAFullCompile compiles every testdata/compile
// input (as JSON, so that its objects are decoded through the Cache one
// by one) through a Cache, then each of its mutations through that Cache
// and the input again, and compares each with a compile from nothing: a
// check the Cache keeps for an unchanged object must be run again when
// an object it reads is removed or renamed (a Secret a listener names, a
// service a route targets, a route table a listener uses) or changed,
// and a changed object's own checks (a negative duration, a bad port)
// are run again. The refusal's text, the warnings and every resource
// must be the same.
func TestCachedChecksAgreeWithAFullCompile(t *testing.T) {
	reg := xdstype.New()
	dir := filepath.Join("testdata", "compile")
	file := func(name string, doc map[string]any) []config.File {
		data, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return []config.File{{Path: filepath.Join(dir, name+".json"), Data: data, Dir: dir}}
	}
	inputs := goldenAsJSON(t)
	if len(inputs) < 20 {
		t.Fatalf("only %d testdata/compile inputs read as JSON", len(inputs))
	}
	compiles := 0
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		doc := inputs[name]
		original := file(name, doc)
		var c Cache
		agree(t, reg, &c, name+": first", original)
		for _, m := range mutations(doc) {
			agree(t, reg, &c, name+": "+m.what, file(name, m.doc))
			agree(t, reg, &c, name+": "+m.what+", then back", original)
			compiles += 2
		}
	}
	t.Logf("%d inputs, %d compiles of mutations", len(inputs), compiles)
	if compiles < 200 {
		t.Fatalf("only %d compiles of mutations: the inputs hold too few model objects to mean anything", compiles)
	}
}

// agree compiles files through c and from nothing and fails t unless the
// two agree.
func agree(t *testing.T, reg *xdstype.Registry, c *Cache, at string, files []config.File) {
	t.Helper()
	inc, incWarn, incErr := c.CompileWithWarnings(reg, files, os.ReadFile)
	full, fullWarn, fullErr := CompileWithWarnings(reg, files, os.ReadFile)
	if fmt.Sprint(incErr) != fmt.Sprint(fullErr) {
		t.Fatalf("%s: through the cache:\n%v\nfrom nothing:\n%v", at, incErr, fullErr)
	}
	if fullErr != nil {
		return
	}
	if d := cmp.Diff(fullWarn, incWarn); d != "" {
		t.Fatalf("%s: warnings differ (-full +cached):\n%s", at, d)
	}
	sameFleet(t, at, full, inc)
}

// TestCachedChecksFollowWhatTheyReadOfOtherObjects changes, one at a
// time and back, each fact a check of an unchanged object reads of
// another: whether a Secret a listener or a service names exists and
// holds a certificate or a CA, whether the service a route targets
// exists, whether an aggregate's member is an aggregate itself, whether
// a grpc target sends RPCs to a service; and a service's own duration.
// Each change is refused exactly as a compile from nothing refuses it,
// and going back is accepted again.
func TestCachedChecksFollowWhatTheyReadOfOtherObjects(t *testing.T) {
	reg := xdstype.New()
	dir := filepath.Join("testdata", "compile")
	base := map[string]string{
		"edge-cert": `{"name": "edge-cert", "cert_file": "certs/edge.crt", "key_file": "certs/edge.key"}`,
		"mesh-ca":   `{"name": "mesh-ca", "ca_file": "certs/ca.crt"}`,
		"payments":  `{"name": "payments", "endpoints": [{"address": "10.0.0.1", "port": 8080}], "tls": {"ca": "mesh-ca"}}`,
		"primary":   `{"name": "primary", "protocol": "grpc", "endpoints": [{"address": "127.0.0.1", "port": 50051}]}`,
		"ledger":    `{"name": "ledger", "protocol": "grpc", "endpoints": [{"address": "127.0.0.1", "port": 50052}]}`,
		"greeter":   `{"name": "greeter", "protocol": "grpc", "aggregate": ["primary", "ledger"]}`,
		"grpc":      `{"target": "greeter", "to": [{"service": "greeter"}]}`,
	}
	render := func(change map[string]string) []config.File {
		get := func(k string) string {
			if v, ok := change[k]; ok {
				return v
			}
			return base[k]
		}
		var secrets, services, grpc []string
		for _, k := range []string{"edge-cert", "mesh-ca"} {
			if v := get(k); v != "" {
				secrets = append(secrets, v)
			}
		}
		for _, k := range []string{"payments", "primary", "ledger", "greeter"} {
			if v := get(k); v != "" {
				services = append(services, v)
			}
		}
		if v := get("grpc"); v != "" {
			grpc = append(grpc, v)
		}
		doc := fmt.Sprintf(`{
"secrets": [%s],
"services": [%s],
"grpc": [%s],
"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "payments"}]}]}]}],
"listeners": [{"name": "l", "port": 8443, "routes": "r", "tls": {"secret": "edge-cert"}}]
}`, strings.Join(secrets, ",\n"), strings.Join(services, ",\n"), strings.Join(grpc, ",\n"))
		return []config.File{{Path: filepath.Join(dir, "world.json"), Data: []byte(doc), Dir: dir}}
	}
	steps := []struct {
		what   string
		change map[string]string
		refuse string // a piece of the refusal
	}{
		{"the Secret a listener names removed", map[string]string{"edge-cert": ""}, `no secret "edge-cert"`},
		{"the Secret a listener names made a CA", map[string]string{"edge-cert": `{"name": "edge-cert", "ca_file": "certs/ca.crt"}`}, "holds a CA, not a certificate"},
		{"the Secret a service names made a certificate", map[string]string{"mesh-ca": `{"name": "mesh-ca", "cert_file": "certs/edge.crt", "key_file": "certs/edge.key"}`}, "holds a certificate, not a CA"},
		{"the service a route targets renamed", map[string]string{"payments": strings.Replace(base["payments"], `"payments"`, `"payment"`, 1)}, `no service "payments"`},
		{"an aggregate's member made an aggregate", map[string]string{"primary": `{"name": "primary", "protocol": "grpc", "aggregate": ["ledger"]}`}, "is an aggregate itself"},
		{"the grpc target sending RPCs to an aggregate removed", map[string]string{"grpc": ""}, "an aggregate service is for proxyless gRPC clients"},
		{"a service's duration made negative", map[string]string{"payments": strings.Replace(base["payments"], `"tls"`, `"connect_timeout": "-1s", "tls"`, 1)}, "negative duration"},
	}
	var c Cache
	agree(t, reg, &c, "the start", render(nil))
	if _, err := Compile(reg, render(nil), os.ReadFile); err != nil {
		t.Fatalf("the start is refused: %v", err)
	}
	for _, s := range steps {
		agree(t, reg, &c, s.what, render(s.change))
		if _, err := Compile(reg, render(s.change), os.ReadFile); err == nil || !strings.Contains(err.Error(), s.refuse) {
			t.Fatalf("%s: refused with %v, want %q", s.what, err, s.refuse)
		}
		agree(t, reg, &c, s.what+", then back", render(nil))
	}
}

// TestCachedChecksPlaceAnObjectWhereItIsNow: an unchanged object whose
// checks are kept, moved down the file by a line written above it, is
// named at its new line by the snapshot's own checks (two listeners on
// one port, a clash the model's checks of each do not see).
func TestCachedChecksPlaceAnObjectWhereItIsNow(t *testing.T) {
	reg := xdstype.New()
	world := func(above string) []config.File {
		doc := `{
"services": [` + above + `{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 8080}]}],
"routes": [{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "to": [{"service": "a"}]}]}]}],
"listeners": [
{"name": "l1", "port": 8080, "routes": "r"},
{"name": "l2", "port": 8080, "routes": "r"}]
}`
		return []config.File{{Path: "world.json", Data: []byte(doc)}}
	}
	var c Cache
	agree(t, reg, &c, "the start", world(""))
	moved := world(`{"name": "b", "endpoints": [{"address": "10.0.0.2", "port": 8080}]},` + "\n\n")
	agree(t, reg, &c, "the listeners moved down two lines", moved)
	if _, err := Compile(reg, moved, nil); err == nil || !strings.Contains(err.Error(), "world.json:7") {
		t.Fatalf("the clash is not named at the listeners' new lines: %v", err)
	}
}
