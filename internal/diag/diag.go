// Package diag holds the one diagnostic type every validation gate reports
// with: it names the file (and line), the resource type and name, and the
// field, so an operator can find a refused change without guessing.
//
// Every config error goes through this type on its way to a log line, the
// status API and an API error, and a decoding error may quote the value it
// refused: a private key held inline. So a diagnostic scrubs key material
// (redact.String) whenever it is rendered, as text or JSON, and List.Err
// scrubs the list it returns: the source is clean, not each place that
// shows it.
package diag

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pylon-xds/pylon/internal/redact"
)

// Diagnostic is one problem found in a configuration.
type Diagnostic struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Type    string `json:"type,omitempty"` // short type name, e.g. "Cluster"
	Name    string `json:"name,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Refusal, when set, is the diagnostic as data: a rule of some
	// proxyless gRPC client implementations that a group's resource
	// breaks (package grpcrules), for whoever lists refusals per client.
	Refusal *Refusal `json:"refusal,omitempty"`
}

// Refusal is what a group's gRPC clients would do with a resource.
type Refusal struct {
	// Clients are the implementations that apply the rule (grpcrules'
	// names: grpc-go, grpc-core, grpc-js).
	Clients []string `json:"clients"`
	Group   string   `json:"group"`
	// Rule is the rule's ID; Effect what the clients do (grpcrules.Effect).
	Rule   string `json:"rule"`
	Effect string `json:"effect"`
	// Detail is the rule's message on its own, without the sentence the
	// diagnostic's Message puts it in.
	Detail string `json:"detail"`
}

// Redacted returns d with key material scrubbed from every text in it.
func (d Diagnostic) Redacted() Diagnostic {
	d.File = redact.String(d.File)
	d.Type = redact.String(d.Type)
	d.Name = redact.String(d.Name)
	d.Field = redact.String(d.Field)
	d.Message = redact.String(d.Message)
	if r := d.Refusal; r != nil {
		c := *r
		c.Group, c.Detail = redact.String(r.Group), redact.String(r.Detail)
		d.Refusal = &c
	}
	return d
}

// MarshalJSON renders the diagnostic redacted.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	type plain Diagnostic // without this method
	return json.Marshal(plain(d.Redacted()))
}

// String renders the diagnostic, redacted, as
// "file:line: Type "name": field: message".
func (d Diagnostic) String() string {
	d = d.Redacted()
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

// Err returns nil for an empty list and the sorted, redacted list
// otherwise.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	for i := range l {
		l[i] = l[i].Redacted()
	}
	l.Sort()
	return l
}
