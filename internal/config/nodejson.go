package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxDepth bounds the nesting of a config value. Envoy's deepest configs
// (matcher trees, RBAC policies) stay well under a hundred levels.
const maxDepth = 1000

// errBudget is returned when a file's aliases expand past its budget.
var errBudget = errors.New("aliases expand to far more than the file holds (an alias bomb?)")

// jsonWriter turns YAML nodes straight into JSON, with no map[string]any
// in between: that double conversion cost a dozen allocations per value.
// budget is what the file may expand to, aliases included: a few KiB of
// nested aliases must not become gigabytes.
type jsonWriter struct {
	buf    bytes.Buffer
	budget int
	// merging are the mappings whose merge is being written, to refuse a
	// merge that includes itself.
	merging map[*yaml.Node]bool
}

// newJSONWriter returns a writer allowed to produce limit bytes in all.
func newJSONWriter(limit int) *jsonWriter { return &jsonWriter{budget: limit} }

// encode returns n as JSON, leaving out the top-level mapping keys in skip.
// The returned bytes are valid until the next call.
func (w *jsonWriter) encode(n *yaml.Node, skip ...string) ([]byte, error) {
	w.buf.Reset()
	if err := w.value(n, 0, skip); err != nil {
		return nil, err
	}
	w.budget -= w.buf.Len()
	if w.budget < 0 {
		return nil, errBudget
	}
	return w.buf.Bytes(), nil
}

func (w *jsonWriter) value(n *yaml.Node, depth int, skip []string) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested more than %d levels deep", n.Line, maxDepth)
	}
	if w.buf.Len() > w.budget {
		return errBudget
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			w.buf.WriteString("null")
			return nil
		}
		return w.value(n.Content[0], depth+1, skip)
	case yaml.AliasNode:
		return w.value(n.Alias, depth+1, skip)
	case yaml.SequenceNode:
		w.buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if err := w.value(c, depth+1, nil); err != nil {
				return err
			}
		}
		w.buf.WriteByte(']')
		return nil
	case yaml.MappingNode:
		return w.mapping(n, depth, skip)
	case yaml.ScalarNode:
		if n.Tag == rawJSONTag {
			w.buf.WriteString(n.Value)
			return nil
		}
		w.scalar(n)
		return nil
	}
	return fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// mapping writes a mapping; merge keys ("<<: *defaults") add the entries
// the mapping does not set itself, as YAML's merge does.
func (w *jsonWriter) mapping(n *yaml.Node, depth int, skip []string) error {
	seen := map[string]bool{}
	for _, s := range skip {
		seen[s] = true
	}
	var merges []*yaml.Node
	first := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: a mapping key must be a plain value", k.Line)
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if seen[k.Value] {
			if contains(skip, k.Value) {
				continue
			}
			return fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		if err := w.entry(&first, k.Value, v, depth); err != nil {
			return err
		}
	}
	for _, m := range merges {
		if err := w.merge(m, seen, &first, depth); err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	if first { // no entry wrote the opening brace
		w.buf.Truncate(w.buf.Len() - 1)
		w.buf.WriteString("{}")
	}
	return nil
}

func (w *jsonWriter) entry(first *bool, key string, v *yaml.Node, depth int) error {
	if *first {
		w.buf.WriteByte('{')
		*first = false
	} else {
		w.buf.WriteByte(',')
	}
	w.quote(key)
	w.buf.WriteByte(':')
	return w.value(v, depth+1, nil)
}

// merge writes the entries of the mapping (or list of mappings) m that
// are not in seen.
//
// A merge is bounded like any nesting, and one that reaches the mapping it
// is written in ("&r {<<: *r}") is an error: it would recurse forever.
func (w *jsonWriter) merge(m *yaml.Node, seen map[string]bool, first *bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: merges (<<) nested more than %d levels deep", m.Line, maxDepth)
	}
	for m.Kind == yaml.AliasNode {
		m = m.Alias
	}
	if w.merging[m] {
		return fmt.Errorf("line %d: a merge (<<) includes the mapping it is in", m.Line)
	}
	if w.merging == nil {
		w.merging = map[*yaml.Node]bool{}
	}
	w.merging[m] = true
	defer delete(w.merging, m)
	switch m.Kind {
	case yaml.SequenceNode:
		for _, c := range m.Content {
			if err := w.merge(c, seen, first, depth+1); err != nil {
				return err
			}
		}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Tag == "!!merge" {
				if err := w.merge(m.Content[i+1], seen, first, depth+1); err != nil {
					return err
				}
				continue
			}
			if seen[k.Value] {
				continue
			}
			seen[k.Value] = true
			if err := w.entry(first, k.Value, m.Content[i+1], depth); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: a merge (<<) takes a mapping or a list of mappings", m.Line)
}

// scalar writes a scalar by its resolved YAML tag, as decoding into
// map[string]any and marshalling to JSON did.
func (w *jsonWriter) scalar(n *yaml.Node) {
	switch n.ShortTag() {
	case "!!null":
		w.buf.WriteString("null")
		return
	case "!!bool":
		if b, err := strconv.ParseBool(n.Value); err == nil {
			w.buf.WriteString(strconv.FormatBool(b))
			return
		}
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			w.buf.WriteString(strconv.FormatInt(i, 10))
			return
		}
		if u, err := strconv.ParseUint(n.Value, 0, 64); err == nil {
			w.buf.WriteString(strconv.FormatUint(u, 10))
			return
		}
	case "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			switch {
			case math.IsInf(f, 1):
				w.quote("Infinity")
			case math.IsInf(f, -1):
				w.quote("-Infinity")
			case math.IsNaN(f):
				w.quote("NaN")
			default:
				w.buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			}
			return
		}
		switch n.Value {
		case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
			w.quote("Infinity")
			return
		case "-.inf", "-.Inf", "-.INF":
			w.quote("-Infinity")
			return
		case ".nan", ".NaN", ".NAN":
			w.quote("NaN")
			return
		}
	}
	w.quote(n.Value)
}

// quote writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced, as encoding/json does.
func (w *jsonWriter) quote(s string) {
	const hex = "0123456789abcdef"
	w.buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			w.buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				w.buf.WriteByte('\\')
				w.buf.WriteByte(c)
			case '\n':
				w.buf.WriteString(`\n`)
			case '\t':
				w.buf.WriteString(`\t`)
			case '\r':
				w.buf.WriteString(`\r`)
			default:
				w.buf.WriteString(`\u00`)
				w.buf.WriteByte(hex[c>>4])
				w.buf.WriteByte(hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.buf.WriteString(s[start:i])
			w.buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		i += size
	}
	w.buf.WriteString(s[start:])
	w.buf.WriteByte('"')
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
