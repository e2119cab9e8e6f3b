// Package diag holds the one diagnostic type every validation gate reports
// with: it names the file (and line), the resource type and name, and the
// field, so an operator can find a refused change without guessing.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Diagnostic is one problem found in a configuration.
type Diagnostic struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Type    string `json:"type,omitempty"` // short type name, e.g. "Cluster"
	Name    string `json:"name,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// String renders the diagnostic as "file:line: Type "name": field: message".
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			fmt.Fprintf(&b, ":%d", d.Line)
		}
		b.WriteString(": ")
	}
	if d.Type != "" {
		b.WriteString(d.Type)
		if d.Name != "" {
			fmt.Fprintf(&b, " %q", d.Name)
		}
		b.WriteString(": ")
	}
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// List is a set of diagnostics; as an error it refuses a whole change.
type List []Diagnostic

// Error joins every diagnostic on its own line.
func (l List) Error() string {
	parts := make([]string, len(l))
	for i, d := range l {
		parts[i] = d.String()
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return fmt.Sprintf("%d problems:\n  %s", len(parts), strings.Join(parts, "\n  "))
}

// Sort orders diagnostics by file, line, type and name so output is stable.
func (l List) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Name < b.Name
	})
}

// Err returns nil for an empty list and the sorted list otherwise.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}
