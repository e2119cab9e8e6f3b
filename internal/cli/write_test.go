package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeDoc writes a config document into a temporary folder.
func writeDoc(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const shopConfig = `services:
- name: shop
  endpoints: [{ address: 10.0.0.1, port: 8080 }]
routes:
- name: shop
  virtual_hosts: [{ name: shop, domains: ["*"], routes: [{ to: [{ service: shop }] }] }]
listeners:
- { name: shop, port: 10080, routes: shop }
`

// apply: --dry-run shows what would change and stores nothing; a real
// apply stores one revision that get and history show; a document that
// does not compile is refused naming the object and field, and nothing is
// stored; a file that is neither YAML nor JSON is refused before sending.
func TestApply(t *testing.T) {
	d := startServe(t)
	doc := writeDoc(t, "shop.yaml", shopConfig)
	before := d.must(t, "history")
	out := d.must(t, "apply", "-f", doc, "--dry-run")
	if !strings.Contains(out, "dry run: nothing stored") || !strings.Contains(out, "shop") {
		t.Fatalf("apply --dry-run:\n%s", out)
	}
	if after := d.must(t, "history"); after != before {
		t.Fatalf("a dry run changed the history:\n%s\nthen\n%s", before, after)
	}
	out = d.must(t, "apply", "-f", doc)
	if !regexp.MustCompile(`stored as revision \d+\nfleet version [0-9a-f]+`).MatchString(out) {
		t.Fatalf("apply:\n%s", out)
	}
	if got := d.must(t, "get", "objects"); !regexp.MustCompile(`(?m)^services\s+shop\b|services/shop`).MatchString(got) {
		t.Fatalf("get objects after apply lacks services/shop:\n%s", got)
	}

	bad := writeDoc(t, "bad.yaml", "listeners:\n- { name: shop, port: 10080, routes: nowhere }\n")
	code, _, stderr := d.cli("apply", "-f", bad)
	if code == 0 || !strings.Contains(stderr, `bad.yaml:2: listener "shop": routes:`) || !strings.Contains(stderr, "nowhere") {
		t.Fatalf("apply of a listener naming a missing route table: exit %d, %s", code, stderr)
	}
	if got := d.must(t, "get", "listeners"); strings.Contains(got, "nowhere") {
		t.Fatalf("the refused document was stored:\n%s", got)
	}
	code, _, stderr = d.cli("apply", "-f", writeDoc(t, "shop.txt", shopConfig))
	if code == 0 || !strings.Contains(stderr, "a config document is a .yaml, .yml or .json file") {
		t.Fatalf("apply of a .txt file: exit %d, %s", code, stderr)
	}
}

// delete: an object something still names is refused with the reference;
// once nothing names it, it goes; an object that does not exist is an
// error, not a silent success.
func TestDelete(t *testing.T) {
	d := startServe(t)
	d.must(t, "apply", "-f", writeDoc(t, "shop.yaml", shopConfig))
	code, _, stderr := d.cli("delete", "services", "shop")
	if code == 0 || !strings.Contains(stderr, "shop") {
		t.Fatalf("delete of a service a route names: exit %d, %s", code, stderr)
	}
	d.must(t, "delete", "listeners", "shop")
	d.must(t, "delete", "routes", "shop")
	if out := d.must(t, "delete", "services", "shop"); !strings.Contains(out, "stored as revision") {
		t.Fatalf("delete services shop:\n%s", out)
	}
	if got := d.must(t, "get", "objects"); strings.Contains(got, "shop") {
		t.Fatalf("shop still listed after delete:\n%s", got)
	}
	if code, _, stderr := d.cli("delete", "services", "shop"); code == 0 || stderr == "" {
		t.Fatalf("delete of a missing object: exit %d, %q", code, stderr)
	}
}

// endpoints add, list and remove: a registration joins the service and is
// listed with its lease, a malformed address is refused before sending,
// and a removed endpoint is gone from the list.
func TestEndpointsCommands(t *testing.T) {
	d := startServe(t)
	d.must(t, "apply", "-f", writeDoc(t, "shop.yaml", shopConfig))
	d.must(t, "endpoints", "add", "shop", "10.0.0.2:8080", "--ttl", "1m", "--weight", "3")
	d.must(t, "endpoints", "add", "shop", "[::1]:8081")
	list := d.must(t, "endpoints", "list", "shop")
	for _, want := range []string{"10.0.0.2", "8080", "::1", "8081"} {
		if !strings.Contains(list, want) {
			t.Fatalf("endpoints list lacks %s:\n%s", want, list)
		}
	}
	if code, _, stderr := d.cli("endpoints", "add", "shop", "10.0.0.3"); code == 0 || !strings.Contains(stderr, "want ADDRESS:PORT") {
		t.Fatalf("endpoints add without a port: exit %d, %s", code, stderr)
	}
	d.must(t, "endpoints", "remove", "shop", "10.0.0.2:8080")
	if list := d.must(t, "endpoints", "list", "shop"); strings.Contains(list, "10.0.0.2") || !strings.Contains(list, "8081") {
		t.Fatalf("after removing 10.0.0.2:8080:\n%s", list)
	}
}
