package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
// lists of resources and model objects are walked in place, each item
// going straight to its value, so memory follows the output, not a tree
// many times the input's size. It reports false, having decoded nothing,
// when f is not one valid JSON object: such a file takes the YAML path,
// whose errors name lines. An item the cache holds is neither checked
// nor decoded again: its text was valid JSON when the cache took it.
func loadJSON(reg *xdstype.Registry, w *jsonWriter, f File, doc *Document, c *Cache) (diag.List, bool) {
	text := string(f.Data) // one copy; every value below is a substring of it
	top, ok := splitJSON(f.Data, text, c)
	if !ok {
		return nil, false
	}
	lc := &lineCounter{data: f.Data, line: 1}
	var problems diag.List
	for _, e := range top {
		keyLine := lc.at(e.keyAt)
		if e.key == "resources" && e.elems != nil {
			problems = append(problems, loadJSONResources(reg, w, f.Path, text, e.elems, lc, doc, c)...)
			continue
		}
		var val *yaml.Node
		if e.elems != nil {
			val = rawItems(text, e.valAt, e.elems, lc)
		} else {
			var err error
			if val, err = yamlOf([]byte(text[e.valAt:e.valEnd]), lc.at(e.valAt)); err != nil {
				problems = append(problems, diag.Diagnostic{File: f.Path, Line: keyLine, Field: shortName(e.key), Message: err.Error()})
				continue
			}
		}
		problems = append(problems, loadKey(reg, w, f.Path, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e.key, Line: keyLine}, val, doc, c)...)
	}
	return problems, true
}

// loadJSONResources walks the elements of a resources list: one turned
// into its message at a time, unless c holds it already.
func loadJSONResources(reg *xdstype.Registry, w *jsonWriter, path, text string, elems [][2]int, lc *lineCounter, doc *Document, c *Cache) diag.List {
	var problems diag.List
	doc.Resources = slices.Grow(doc.Resources, len(elems))
	for _, el := range elems {
		raw, line := text[el[0]:el[1]], lc.at(el[0])
		if r, _, ok := cached[xdstype.Resource](c, "resource", raw); ok {
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

// topEntry is an entry of a JSON document's top-level object; elems are
// its value's elements when it is a list of resources or model objects.
type topEntry struct {
	entry
	elems [][2]int
}

// splitJSON splits the JSON document text (data's bytes, as a string)
// into its top-level entries, and reports whether it is one valid JSON
// object. Each value is checked, but for the items of a list the cache
// holds: a change to one object of a large file checks that object and
// the document's structure, not every object again.
func splitJSON(data []byte, text string, c *Cache) ([]topEntry, bool) {
	i := skipSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return nil, false
	}
	var out []topEntry
	for i = skipSpace(text, i+1); i < len(text) && text[i] != '}'; {
		if text[i] != '"' {
			return nil, false
		}
		keyEnd := skipValue(text, i)
		if !json.Valid(data[i:keyEnd]) {
			return nil, false
		}
		e := topEntry{entry: entry{key: jsonString(text[i:keyEnd]), keyAt: i}}
		if i = skipSpace(text, keyEnd); i >= len(text) || text[i] != ':' {
			return nil, false
		}
		if e.valAt = skipSpace(text, i+1); e.valAt >= len(text) {
			return nil, false
		}
		var ok bool
		if kind := itemKind(e.key); kind != "" && text[e.valAt] == '[' {
			e.elems, e.valEnd, ok = splitList(data, text, e.valAt, kind, c)
		} else {
			e.valEnd = skipValue(text, e.valAt)
			ok = json.Valid(data[e.valAt:e.valEnd])
		}
		if !ok {
			return nil, false
		}
		out = append(out, e)
		if i = skipSpace(text, e.valEnd); i < len(text) && text[i] == ',' {
			if i = skipSpace(text, i+1); i < len(text) && text[i] == '}' {
				return nil, false // a trailing comma
			}
		} else if i >= len(text) || text[i] != '}' {
			return nil, false
		}
	}
	if i >= len(text) || skipSpace(text, i+1) != len(text) {
		return nil, false
	}
	return out, true
}

// splitList splits the JSON list at text[at] into its elements, checking
// each that c does not hold as kind, and returns them and the list's end.
func splitList(data []byte, text string, at int, kind string, c *Cache) ([][2]int, int, bool) {
	elems := [][2]int{}
	for i := skipSpace(text, at+1); i < len(text); {
		if text[i] == ']' && len(elems) == 0 {
			return elems, i + 1, true
		}
		end := skipValue(text, i)
		if end == i || !c.has(kind, text[i:end]) && !json.Valid(data[i:end]) {
			return nil, 0, false
		}
		elems = append(elems, [2]int{i, end})
		switch i = skipSpace(text, end); {
		case i < len(text) && text[i] == ',':
			i = skipSpace(text, i+1)
		case i < len(text) && text[i] == ']':
			return elems, i + 1, true
		default:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// itemKind is the kind of item ("resource", "service", ...) a top-level
// key lists, "" for a key that lists none.
func itemKind(key string) string {
	switch key {
	case "resources":
		return "resource"
	case "groups":
		return "group"
	case "services":
		return "service"
	case "endpoints":
		return "endpoint"
	case "routes":
		return "route table"
	case "listeners":
		return "listener"
	case "secrets":
		return "secret"
	case "grpc":
		return "grpc target"
	case "tests":
		return "route test"
	}
	return ""
}

// rawItems is a sequence node of the elements elems of the JSON array at
// text[at], each a scalar holding its raw JSON (tagged rawJSONTag):
// decodeItems parses only those the cache does not hold.
func rawItems(text string, at int, elems [][2]int, lc *lineCounter) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: lc.at(at), Content: make([]*yaml.Node, len(elems))}
	nodes := make([]yaml.Node, len(elems)) // one allocation for all
	for i, el := range elems {
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

// skipValue returns the end of the JSON value at text[i]. Text that is
// not JSON gets some end, at i or after it, that its caller's check then
// refuses (splitJSON): it always ends.
func skipValue(text string, i int) int {
	switch text[i] {
	case '"':
		return skipString(text, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(text); j++ {
			// Most of a list's bytes are none of these: skipped a byte
			// at a time without a switch.
			for j < len(text) && !structural[text[j]] {
				j++
			}
			if j == len(text) {
				break
			}
			switch text[j] {
			case '"':
				j = skipString(text, j) - 1
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

// structural marks the bytes a scan of a list or an object stops at.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// skipString returns the end of the JSON string at text[i] (a '"'): the
// next quote not escaped, one after an even number of backslashes.
func skipString(text string, i int) int {
	for j := i + 1; j < len(text); {
		k := strings.IndexByte(text[j:], '"')
		if k < 0 {
			break
		}
		j += k
		escapes := 0
		for b := j - 1; b > i && text[b] == '\\'; b-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1
		}
		j++
	}
	return len(text)
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
