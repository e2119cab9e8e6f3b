package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/pylon-xds/pylon/internal/xdstype"
)

// isJSONObject reports whether data is one JSON object: what the JSON
// path reads.
func isJSONObject(data []byte) bool {
	i := skipSpace(string(data), 0)
	return i < len(data) && data[i] == '{' && json.Valid(data)
}

// yamlPathOf is data (a JSON document) made to take the YAML path: a
// comment line after it is YAML, not JSON, and moves no line.
func yamlPathOf(data []byte) []byte { return append(append([]byte{}, data...), "\n# yaml\n"...) }

// loadBothWays loads data (a JSON document) through the JSON path and
// through the YAML path and returns the difference, "" for none: the
// same Document, file and lines included, or the same error.
func loadBothWays(reg *xdstype.Registry, data []byte) (string, error) {
	if !isJSONObject(data) {
		return "", fmt.Errorf("not a JSON document")
	}
	got, gotErr := Load(reg, []File{{Path: "c.json", Data: data}})
	want, wantErr := Load(reg, []File{{Path: "c.json", Data: yamlPathOf(data)}})
	if (gotErr == nil) != (wantErr == nil) {
		return fmt.Sprintf("JSON path: %v; YAML path: %v", gotErr, wantErr), nil
	}
	if wantErr != nil {
		// A raw resource's diagnostics differ by path (the JSON path reads
		// a resource's lines from its shallow node): the model items'
		// must not.
		// Nor does the error of text the YAML parser cannot read.
		if bytes.Contains(data, []byte(`"resources"`)) || strings.Contains(wantErr.Error(), "invalid YAML") {
			return "", wantErr
		}
		return cmp.Diff(wantErr.Error(), gotErr.Error()), wantErr
	}
	return cmp.Diff(want, got, protocmp.Transform(), cmp.Comparer(func(a, b *xdstype.Type) bool { return a == b }), ignoreIdentities), nil
}

// jsonOf is a YAML document as JSON (its first document, anchors
// expanded), compact or indented; nil if it has none or it is not a
// mapping.
func jsonOf(t *testing.T, data []byte, indent bool) []byte {
	var v any
	if yaml.Unmarshal(data, &v) != nil {
		return nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil
	}
	var out []byte
	var err error
	if indent {
		out, err = json.MarshalIndent(v, "", "  ")
	} else {
		out, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// corpus is the FuzzLoad seed corpus: the examples and tricky configs.
func corpus(t *testing.T) map[string][]byte {
	paths, err := filepath.Glob("testdata/fuzz/FuzzLoad/*")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, _ := strings.Cut(string(b), "[]byte(")
		s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(lit), ")")))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = []byte(s)
	}
	return out
}

// TestJSONPathLoadsAsYAMLPath: a JSON document decodes to the same
// Document (every item, file and line) or the same diagnostics through
// the JSON path, which decodes model items without a YAML tree, as
// through the YAML path: every config of the fuzz corpus as JSON, compact
// and indented, and the cases where YAML and JSON read text apart.
func TestJSONPathLoadsAsYAMLPath(t *testing.T) {
	reg := xdstype.New()
	docs := map[string][]byte{
		"cache doc":          cacheDoc(`, {"name": "c", "labels": {"a\u00e9": "\u00e9\t\\u00e9"}}`, true),
		"a key twice":        []byte(`{"services": [{"name": "a", "protocol": "http", "protocol": "http2"}]}`),
		"a nested key twice": []byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80, "port": 81}]}]}`),
		"escaped key twice":  []byte(`{"services": [{"name": "a", "labels": {"k": "1", "\u006b": "2"}}]}`),
		"merge key":          []byte(`{"services": [{"name": "a", "labels": {"<<": "x"}}]}`),
		"numbers":            []byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80.0, "weight": 1e1, "priority": -0}]}]}`),
		"escapes":            []byte(`{"services": [{"name": "a\"c\\d\u0041", "labels": {"x": "\u00e9\u2028\b\f\n\r\t\u0000"}}]}`),
		"unread escapes":     []byte(`{"services": [{"name": "a\/b", "labels": {"x": "\ud83d\ude00"}}]}`),
		"unicode":            []byte(`{"services": [{"name": "caf` + "\u00e9" + `", "labels": {"x": "` + "\u2028\u0085\u007f" + `"}}]}`),
		"unknown field":      []byte("{\"services\": [\n{\"name\": \"a\",\n \"tyop\": 1}]}"),
		"bad values":         []byte("{\"services\": [\n{\"name\": \"a\",\n \"connect_timeout\": \"fast\",\n \"endpoints\": [{\"port\": \"x\"}]}]}"),
		"no name":            []byte(`{"services": [{"protocol": "http"}], "routes": [{"name": ""}]}`),
		"bad name":           []byte(`{"services": [{"name": "a\u0001"}]}`),
		"not a mapping":      []byte(`{"services": [1, "x", null, []]}`),
		"deep":               []byte(`{"services": [{"name": "a", "labels": ` + strings.Repeat(`{"a": `, maxDepth+1) + `1` + strings.Repeat(`}`, maxDepth+1) + `}]}`),
		"many keys":          []byte(`{"services": [{"name": "a", "labels": {` + manyKeys(100) + `, "k7": "again"}}]}`),
		"line breaks":        []byte("{\"services\": [\n{\n\"name\":\n\"a\"\n,\n\"endpoints\":\r\n[\n{\"address\": \"10.0.0.1\",\t\"port\":\n80\n}\n]\n}\n]\n}"),
		"break before colon": []byte("{\"services\": [{\"name\"\n: \"a\"}]}"),
		"a long key":         []byte(`{"services": [{"name": "a", "labels": {"` + strings.Repeat("k", 1100) + `": "v"}}]}`),
		"rollout":            []byte(`{"groups": [{"name": "g", "default": true, "rollout": {"stages": [{"share": "10%", "bake": "1s"}, {"share": 50.0}]}}]}`),
	}
	for name, data := range corpus(t) {
		if isJSONObject(data) {
			docs[name] = data
			continue
		}
		for _, indent := range []bool{false, true} {
			if j := jsonOf(t, data, indent); j != nil {
				docs[fmt.Sprintf("%s as JSON (indented: %v)", name, indent)] = j
			}
		}
	}
	for name, data := range docs {
		diff, err := loadBothWays(reg, data)
		if diff != "" {
			t.Errorf("%s: the JSON path differs from the YAML path (-YAML +JSON):\n%s", name, diff)
		}
		if err != nil {
			t.Logf("%s: refused alike: %v", name, firstLine(err.Error()))
		}
	}
}

func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d": "%d"`, i, i)
	}
	return strings.Join(keys, ", ")
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// FuzzJSONPathLoadsAsYAMLPath loads a JSON document both ways
// (loadBothWays): the same Document or the same error. Seeds: the
// corpus's configs as JSON.
func FuzzJSONPathLoadsAsYAMLPath(f *testing.F) {
	f.Add(cacheDoc("", true))
	f.Add([]byte(`{"services": [{"name": "a", "labels": {"k": "1", "\u006b": "2"}}]}`))
	f.Add([]byte(`{"services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80.0}]}], "groups": [{"name": "g", "rollout": {"stages": [{"share": 1e1}]}}]}`))
	reg := xdstype.New()
	for _, s := range jsonSplitCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			t.Skip()
		}
		if _, ok := splitJSON(data, string(data), nil); ok != isJSONObject(data) {
			t.Fatalf("splitJSON says valid: %v; json.Valid says %v", ok, !ok)
		}
		if !isJSONObject(data) {
			t.Skip()
		}
		if diff, _ := loadBothWays(reg, data); diff != "" {
			t.Fatalf("the JSON path differs from the YAML path (-YAML +JSON):\n%s", diff)
		}
	})
}

// A JSON file of model objects decodes each straight into its type: it
// allocates some 13 times its size (the decoded objects and encoding/json's
// work), not a YAML tree of each object and its re-encoding (138 bytes per
// input byte when each went through one). Not a timed test.
func TestJSONItemsAllocateLittlePerInputByte(t *testing.T) {
	reg := xdstype.New()
	data := itemsWorld(4000)
	var doc *Document
	var err error
	got := float64(allocatedBy(func() { doc, err = Load(reg, []File{{Path: "big.json", Data: data}}) })) / float64(len(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Services) != 4000 {
		t.Fatalf("%d services decoded", len(doc.Services))
	}
	t.Logf("%.1f bytes allocated per input byte", got)
	if got > 20 {
		t.Errorf("decoding model objects allocated %.1f bytes per input byte, want at most 20", got)
	}
}

var jsonSplitCases = []string{
	`{}`, ` { } `, `{"a": 1}`, `{"a": 1,}`, `{"a": 1 "b": 2}`, `{"a" 1}`, `{"a": }`, `{"a": 1}}`, `{"a": 1} x`, `{"a": 1`,
	`{"services": []}`, `{"services": [ ]}`, `{"services": [,]}`, `{"services": [{},]}`, `{"services": [{} {}]}`,
	`{"services": [{"a": 1]}`, `{"services": [{"a": 1}, 2, "x", null, [1]]}`, `{"services": [1x]}`, `{"services": ["a]}`,
	`{"resources": [{"@type": "x"}], "version": 1}`, `{"version": 01}`, `{"version": [1,]}`, `{"x\u00": 1}`, `{"x\q": 1}`,
	`{"services": [{"name": "a\u0000"}]}`, "{\"a\": \"\x01\"}", "\ufeff{}", `[{}]`, `{,"a": 1}`, `{"services": {"a": [1,]}}`,
}

// splitJSON, which checks only what the cache does not hold, takes what
// json.Valid takes for one object, and a cached item's text as valid.
func TestSplitJSONAcceptsWhatJSONValidDoes(t *testing.T) {
	for _, s := range jsonSplitCases {
		data := []byte(s)
		if _, ok := splitJSON(data, s, nil); ok != isJSONObject(data) {
			t.Errorf("%s: splitJSON says valid: %v, json.Valid %v", s, ok, !ok)
		}
	}
	var c Cache
	doc := []byte(`{"services": [{"name": "a"}, {"name": "b"}]}`)
	if _, err := c.Load(xdstype.New(), []File{{Path: "c.json", Data: doc}}); err != nil {
		t.Fatal(err)
	}
	if !c.has("service", `{"name": "a"}`) || c.has("route table", `{"name": "a"}`) {
		t.Fatal("the cache does not hold the loaded items by kind")
	}
	if _, ok := splitJSON(doc, string(doc), &c); !ok {
		t.Error("a document of cached items is not valid")
	}
}
