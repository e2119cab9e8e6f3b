package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// rawJSONTag marks a scalar node whose Value is a JSON value to copy as is:
// the JSON path gives decodeResource a shallow node per resource, with the
// top-level fields as raw JSON, instead of a whole YAML tree.
const rawJSONTag = "!pylon/rawjson"

// loadJSON decodes a file that is valid JSON (the store's objects, API
// bodies, generated configs) without building a YAML tree of it: the
// resources list is walked in place, each resource going straight to its
// message, so memory follows the output, not a tree many times the
// input's size. data has passed json.Valid, so the scanner below can skip
// values without re-checking their syntax.
func loadJSON(reg *xdstype.Registry, w *jsonWriter, f File, doc *Document, c *Cache) diag.List {
	lc := &lineCounter{data: f.Data, line: 1}
	text := string(f.Data) // one copy; every value below is a substring of it
	start := valueStart(f.Data, 0)
	if text[start] != '{' {
		return diag.List{{File: f.Path, Line: 1, Message: "a config document must be a mapping with a `resources` list"}}
	}
	var problems diag.List
	for _, e := range objectEntries(text, start) {
		keyLine := lc.at(e.keyAt)
		if e.key == "resources" && text[e.valAt] == '[' {
			problems = append(problems, loadJSONResources(reg, w, f.Path, text, e.valAt, lc, doc, c)...)
			continue
		}
		var val *yaml.Node
		if text[e.valAt] == '[' && isItemsKey(e.key) {
			val = rawItems(text, e.valAt, lc)
		} else {
			var err error
			if val, err = yamlOf([]byte(text[e.valAt:e.valEnd]), lc.at(e.valAt)); err != nil {
				problems = append(problems, diag.Diagnostic{File: f.Path, Line: keyLine, Field: shortName(e.key), Message: err.Error()})
				continue
			}
		}
		problems = append(problems, loadKey(reg, w, f.Path, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e.key, Line: keyLine}, val, doc, c)...)
	}
	return problems
}

// loadJSONResources walks the resources list at text[at]: one element
// turned into its message at a time, unless c holds it already.
func loadJSONResources(reg *xdstype.Registry, w *jsonWriter, path, text string, at int, lc *lineCounter, doc *Document, c *Cache) diag.List {
	var problems diag.List
	for _, el := range arrayElements(text, at) {
		raw, line := text[el[0]:el[1]], lc.at(el[0])
		if r, ok := cached[xdstype.Resource](c, "resource", raw); ok {
			r.File, r.Line = path, line
			doc.Resources = append(doc.Resources, r)
			continue
		}
		r, d := decodeResource(reg, w, path, shallowNode(text, el[0], el[1], line))
		if d != nil {
			problems = append(problems, *d)
			continue
		}
		c.put("resource", raw, r)
		doc.Resources = append(doc.Resources, r)
	}
	return problems
}

// isItemsKey reports whether a top-level key holds a list of model objects.
func isItemsKey(key string) bool {
	switch key {
	case "groups", "services", "endpoints", "routes", "listeners", "secrets", "grpc", "tests":
		return true
	}
	return false
}

// rawItems is a sequence node of the elements of the JSON array at
// text[at], each a scalar holding its raw JSON (tagged rawJSONTag):
// decodeItems parses only those the cache does not hold.
func rawItems(text string, at int, lc *lineCounter) *yaml.Node {
	els := arrayElements(text, at)
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: lc.at(at), Content: make([]*yaml.Node, len(els))}
	nodes := make([]yaml.Node, len(els)) // one allocation for all
	for i, el := range els {
		nodes[i] = yaml.Node{Kind: yaml.ScalarNode, Tag: rawJSONTag, Value: text[el[0]:el[1]], Line: lc.at(el[0])}
		n.Content[i] = &nodes[i]
	}
	return n
}

// shallowNode is a mapping node of the top-level fields of the JSON value
// text[from:to]: strings as string scalars (so that @type, @ttl and the
// name read as in YAML), other values as raw JSON. Its Value keeps the raw
// value, for deepNode. A non-object is returned as a raw scalar, which
// decodeResource refuses.
func shallowNode(text string, from, to, line int) *yaml.Node {
	if text[from] != '{' {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: rawJSONTag, Value: text[from:to], Line: line}
	}
	entries := objectEntries(text, from)
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: rawJSONTag, Value: text[from:to], Line: line, Content: make([]*yaml.Node, 0, 2*len(entries))}
	nodes := make([]yaml.Node, 2*len(entries)) // one allocation for all
	for i, e := range entries {
		k, v := &nodes[2*i], &nodes[2*i+1]
		*k = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e.key, Line: line}
		*v = yaml.Node{Kind: yaml.ScalarNode, Tag: rawJSONTag, Value: text[e.valAt:e.valEnd], Line: line}
		if text[e.valAt] == '"' {
			v.Tag, v.Value = "!!str", jsonString(text[e.valAt:e.valEnd])
		}
		n.Content = append(n.Content, k, v)
	}
	return n
}

type entry struct {
	key           string
	keyAt         int
	valAt, valEnd int
}

// objectEntries lists the entries of the (valid) JSON object at text[at].
func objectEntries(text string, at int) []entry {
	var out []entry
	i := skipSpace(text, at+1)
	for i < len(text) && text[i] != '}' {
		keyEnd := skipValue(text, i)
		e := entry{key: jsonString(text[i:keyEnd]), keyAt: i}
		e.valAt = skipSpace(text, skipSpace(text, keyEnd)+1) // past ':'
		e.valEnd = skipValue(text, e.valAt)
		out = append(out, e)
		i = skipSpace(text, e.valEnd)
		if i < len(text) && text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	return out
}

// arrayElements lists the [start, end) of each element of the (valid) JSON
// array at text[at].
func arrayElements(text string, at int) [][2]int {
	var out [][2]int
	i := skipSpace(text, at+1)
	for i < len(text) && text[i] != ']' {
		end := skipValue(text, i)
		out = append(out, [2]int{i, end})
		i = skipSpace(text, end)
		if i < len(text) && text[i] == ',' {
			i = skipSpace(text, i+1)
		}
	}
	return out
}

// skipValue returns the end of the (valid) JSON value at text[i].
func skipValue(text string, i int) int {
	switch text[i] {
	case '"':
		for j := i + 1; j < len(text); j++ {
			switch text[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(text)
	case '{', '[':
		depth := 0
		for j := i; j < len(text); j++ {
			switch text[j] {
			case '"':
				j = skipValue(text, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(text)
	}
	j := i
	for j < len(text) && !strings.ContainsRune(" \t\r\n,]}", rune(text[j])) {
		j++
	}
	return j
}

func skipSpace(text string, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n') {
		i++
	}
	return i
}

// jsonString decodes the JSON string literal s; without escapes it is a
// substring, with no copy.
func jsonString(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return s[1 : len(s)-1]
	}
	var out string
	_ = json.Unmarshal([]byte(s), &out) // valid: the file passed json.Valid
	return out
}

// deepNode returns the whole YAML tree of a node shallowNode made, with
// the file's line numbers, for an error message that points at a nested
// field; any other node is returned as it is.
func deepNode(n *yaml.Node) *yaml.Node {
	if n.Tag != rawJSONTag {
		return n
	}
	if full, err := yamlOf([]byte(n.Value), n.Line); err == nil {
		return full
	}
	return n
}

// yamlOf parses a JSON value as YAML (JSON is YAML) with its lines counted
// from line.
func yamlOf(raw []byte, line int) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: line}, nil
	}
	shiftLines(doc.Content[0], line-1)
	return doc.Content[0], nil
}

func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}

// valueStart skips the separators after offset to where the next value
// begins.
func valueStart(data []byte, offset int) int {
	for offset < len(data) {
		switch data[offset] {
		case ' ', '\t', '\r', '\n', ',', ':':
			offset++
			continue
		}
		break
	}
	return offset
}

// lineCounter turns increasing byte offsets into line numbers in one pass.
type lineCounter struct {
	data []byte
	off  int
	line int
}

func (c *lineCounter) at(offset int) int {
	offset = min(offset, len(c.data))
	if offset > c.off {
		c.line += bytes.Count(c.data[c.off:offset], []byte{'\n'})
		c.off = offset
	}
	return c.line
}

// looksLikeJSON reports whether data is one JSON object, for the streaming
// path; anything else (YAML, or broken JSON, whose errors the YAML parser
// reports with lines) takes the YAML path.
func looksLikeJSON(data []byte) bool {
	i := valueStart(data, 0)
	return i < len(data) && data[i] == '{' && json.Valid(data)
}
