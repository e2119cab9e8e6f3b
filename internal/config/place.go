package config

import (
	"errors"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pylon-xds/pylon/internal/diag"
)

// A check of the model or of a resource reports the object's line and the
// field's path ("virtual_hosts[0].routes[1].to[0].service"): the object is
// what it knows. PlaceFields turns that into the field's own line, from
// the file: the line an editor should jump to.

// PlaceFields returns err with each diagnostic's line moved from its
// object's line to its field's, reading the files it names (each parsed
// once, only here: on the error path). err is returned as it is unless it
// is a diag.List.
func PlaceFields(files []File, err error) error {
	var list diag.List
	if !errors.As(err, &list) || errors.Unwrap(err) != nil {
		return err
	}
	data := make(map[string][]byte, len(files))
	for _, f := range files {
		data[f.Path] = f.Data
	}
	placers := map[string]*FieldLines{}
	out := make(diag.List, len(list))
	for i, d := range list {
		out[i] = d
		b, ok := data[d.File]
		if !ok || d.Line <= 0 || d.Field == "" {
			continue
		}
		p, seen := placers[d.File]
		if !seen {
			p = NewFieldLines(b)
			placers[d.File] = p
		}
		out[i].Line = p.Line(d.Line, d.Field)
	}
	return out
}

// FieldLines finds fields' lines in one YAML document, parsed once, on
// the first Line, and indexed by line: placing each of many diagnostics
// costs its path, not another pass over the document.
type FieldLines struct {
	data   []byte
	parsed bool
	// objects are the mappings that start on each line, in file order.
	objects map[int][]*yaml.Node
}

// NewFieldLines returns the field lines of data, parsed when first asked.
func NewFieldLines(data []byte) *FieldLines { return &FieldLines{data: data} }

// Line is the line of field inside the object of the document that starts
// at line: the deepest key of the path that the document has, else line.
func (f *FieldLines) Line(line int, field string) int {
	if !f.parsed {
		f.parsed, f.objects = true, indexMappings(parseRoot(f.data))
	}
	path := fieldPath(field)
	for _, n := range f.objects[line] {
		if l := follow(n, path); l > 0 {
			return l
		}
	}
	return line
}

func parseRoot(data []byte) *yaml.Node {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	return &root
}

// indexMappings lists the mapping nodes under root by the line each
// starts on, in file order, down to maxDepth.
func indexMappings(root *yaml.Node) map[int][]*yaml.Node {
	out := map[int][]*yaml.Node{}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if depth > maxDepth {
			return
		}
		if n.Kind == yaml.MappingNode {
			out[n.Line] = append(out[n.Line], n)
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	if root != nil {
		walk(root, 0)
	}
	return out
}

// follow walks path from the mapping n and returns the line of the
// deepest step found (a key's line, or a list item's), 0 if not even the
// first.
func follow(n *yaml.Node, path []string) int {
	line := 0
	for _, step := range path {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch i, err := strconv.Atoi(step); {
		case err == nil && n.Kind == yaml.SequenceNode:
			if i < 0 || i >= len(n.Content) {
				return line
			}
			next = n.Content[i]
			line = next.Line
		case err != nil && n.Kind == yaml.MappingNode:
			want := lowerCamel(step)
			for k := 0; k+1 < len(n.Content); k += 2 {
				if lowerCamel(n.Content[k].Value) == want {
					next, line = n.Content[k+1], n.Content[k].Line
					break
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// fieldPath splits "a.b[0].c" into "a", "b", "0", "c".
func fieldPath(field string) []string {
	var out []string
	for _, part := range strings.Split(field, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, part)
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				out = append(out, part[i+1:])
				break
			}
			out = append(out, part[i+1:i+j])
			part = part[i+j+1:]
		}
	}
	return out
}
