package compile

import (
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A config routing to a service with no endpoints compiles, with a
// warning naming the file and line of the route table, its field and the
// service's empty endpoint set; its endpoints registered, it compiles
// without one. Compile itself is unchanged.
func TestCompileWarnsOfRoutesToNoEndpoints(t *testing.T) {
	doc := `services:
- name: web
  endpoints: [{ address: 10.0.0.1, port: 8080 }]
- name: waiting
listeners:
- { name: http, port: 10000, routes: all }
routes:
- name: all
  virtual_hosts:
  - name: any
    domains: ["*"]
    routes:
    - match: { prefix: /waiting }
      to: [{ service: waiting }]
    - to: [{ service: web }]
`
	files := []config.File{{Path: "pylon.yaml", Data: []byte(doc)}}
	fleet, warnings, err := CompileWithWarnings(xdstype.New(), files, nil)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings, want 1:\n%v", len(warnings), warnings)
	}
	w := warnings[0]
	if w.File != "pylon.yaml" || w.Line == 0 || w.Type != "RouteConfiguration" || w.Name != "all" ||
		!strings.HasSuffix(w.Field, ".cluster") || !strings.Contains(w.Message, `"waiting"`) || !strings.Contains(w.Message, "endpoint set is empty") {
		t.Errorf("warning: %s", w)
	}
	if again, err := Compile(xdstype.New(), files, nil); err != nil || again.Version() != fleet.Version() {
		t.Fatalf("Compile: %v, version %s, want %s", err, again.Version(), fleet.Version())
	}
	registered := strings.Replace(doc, "- name: waiting\n", "- name: waiting\n  endpoints: [{ address: 10.0.0.2, port: 8080 }]\n", 1)
	if _, warnings, err := CompileWithWarnings(xdstype.New(), []config.File{{Path: "pylon.yaml", Data: []byte(registered)}}, nil); err != nil || len(warnings) != 0 {
		t.Fatalf("with endpoints: %v, warnings %v", err, warnings)
	}
}
