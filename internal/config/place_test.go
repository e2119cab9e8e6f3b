package config

import (
	"errors"
	"testing"

	"github.com/pylon-xds/pylon/internal/diag"
)

// A diagnostic at its object's line moves to its field's: through lists,
// flow mappings and camelCase keys; a path the file does not have stops
// at the deepest step it does (or the object); other errors pass as they
// are.
func TestPlaceFieldsMovesToTheFieldsLine(t *testing.T) {
	const doc = `version: 1
routes:
- name: a
  virtual_hosts:
  - name: all
    routes:
    - to: [{ service: x }]
    - match: { prefix: /y }
      to:
      - service: y
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: c
  connectTimeout: 1s
`
	files := []File{{Path: "f.yaml", Data: []byte(doc)}}
	for _, c := range []struct {
		line  int
		field string
		want  int
	}{
		{3, "virtual_hosts[0].routes[1].to[0].service", 10},
		{3, "virtual_hosts[0].routes[0].to[0].service", 7},
		{3, "virtual_hosts[0].routes[1].match.prefix", 8},
		{3, "virtual_hosts[0].routes[7].to", 6}, // no such item: the list
		{3, "nowhere.at.all", 3},                // no such key: the object
		{12, "connect_timeout", 14},             // snake_case field, camelCase key
		{5, "routes[0]", 7},                     // an inner object, a path from there to a list item
	} {
		err := PlaceFields(files, diag.List{{File: "f.yaml", Line: c.line, Field: c.field, Message: "m"}})
		var got diag.List
		if !errors.As(err, &got) || got[0].Line != c.want {
			t.Errorf("line %d, field %s: %v, want line %d", c.line, c.field, err, c.want)
		}
	}
	plain := errors.New("not diagnostics")
	if PlaceFields(files, plain) != plain {
		t.Error("an error that is not a diag.List was changed")
	}
}
