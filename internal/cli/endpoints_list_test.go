package cli

import (
	"strings"
	"testing"
)

// A stored config with groups (whose stored body is a list) does not stop
// endpoints list: only the registrations are read as endpoints.
func TestEndpointsListBesideGroups(t *testing.T) {
	d := startServe(t)
	d.must(t, "apply", "-f", writeDoc(t, "shop.yaml", "groups:\n- { name: edge, default: true }\n"+shopConfig))
	d.must(t, "endpoints", "add", "shop", "10.0.0.2:8080", "--ttl", "1m")
	list := d.must(t, "endpoints", "list")
	if row(list, "shop", "10.0.0.2:8080") == "" {
		t.Fatalf("endpoints list lacks shop 10.0.0.2:8080:\n%s", list)
	}
	if out := d.must(t, "endpoints", "list", "-o", "json"); !strings.Contains(out, "10.0.0.2:8080") || strings.Contains(out, `"groups"`) {
		t.Fatalf("endpoints list -o json:\n%s", out)
	}
}
