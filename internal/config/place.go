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
	roots := map[string]*yaml.Node{}
	out := make(diag.List, len(list))
	for i, d := range list {
		out[i] = d
		b, ok := data[d.File]
		if !ok || d.Line <= 0 || d.Field == "" {
			continue
		}
		root, seen := roots[d.File]
		if !seen {
			root = parseRoot(b)
			roots[d.File] = root
		}
		out[i].Line = fieldLine(root, d.Line, d.Field)
	}
	return out
}

// FieldLine is the line of field inside the object of data that starts at
// line: the deepest key of the path that the file has, else line.
func FieldLine(data []byte, line int, field string) int {
	return fieldLine(parseRoot(data), line, field)
}

func parseRoot(data []byte) *yaml.Node {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	return &root
}

func fieldLine(root *yaml.Node, line int, field string) int {
	if root == nil {
		return line
	}
	path := fieldPath(field)
	best := line
	var walk func(n *yaml.Node, depth int) bool
	walk = func(n *yaml.Node, depth int) bool {
		if depth > maxDepth {
			return false
		}
		if n.Kind == yaml.MappingNode && n.Line == line {
			if l := follow(n, path); l > 0 {
				best = l
				return true
			}
		}
		if n.Line > line && n.Kind != yaml.DocumentNode {
			return false // nodes come in file order: the object is behind
		}
		for _, c := range n.Content {
			if walk(c, depth+1) {
				return true
			}
		}
		return false
	}
	walk(root, 0)
	return best
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
