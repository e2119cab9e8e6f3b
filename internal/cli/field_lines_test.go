package cli

import (
	"strings"
	"testing"
)

// A refused config names each field's own line, not its object's: a
// route's reference to a service there is not is reported at the
// reference, in file mode (validate) and through the API (apply), which
// names the file the CLI sent rather than the stored object.
func TestErrorsNameTheFileAndTheFieldsLine(t *testing.T) {
	const file = "testdata/field_lines.yaml"
	want := []string{
		file + `:8: service "api": conect_timeout: unknown field "conect_timeout"`,
		file + `:20: route table "public": virtual_hosts[0].routes[1].to[0].service: no service "nowhere"`,
	}
	fixed := strings.Replace(readFile(t, file), "conect_timeout", "connect_timeout", 1)
	fixedFile := t.TempDir() + "/fixed.yaml"
	writeFile(t, fixedFile, fixed)

	d := startServe(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", file}, want[0]},
		{[]string{"apply", file}, want[0]},
		{[]string{"validate", fixedFile}, strings.Replace(want[1], file, fixedFile, 1)},
		{[]string{"apply", fixedFile, "--dry-run"}, strings.Replace(want[1], file, fixedFile, 1)},
	} {
		code, _, stderr := d.cli(c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("pylon %v: exit %d, stderr:\n%s\nwant it to say:\n%s", c.args, code, stderr, c.want)
		}
	}
}

// Through the API without a file name, a diagnostic names the object by
// its store key (kind/name), with no line. A file name with a tab or a
// control character in it, or a long one, is shown sanitized (each such
// character a "?", a long name cut to its last 512 bytes), never a reason
// to refuse the write: a document in such a file applies as any other.
func TestApplyAPINamesTheBodyWithoutAFile(t *testing.T) {
	d := startServe(t)
	body := "version: 1\nservices:\n- name: api\n  conect_timeout: 1s\n"
	if code, got := d.post(t, "/v1/apply?dryRun=true", "application/yaml", body); code != 400 || !strings.Contains(got, `"file": "services/api"`) || strings.Contains(got, `"line"`) {
		t.Errorf("apply without a file: %d %s", code, got)
	}
	long := strings.Repeat("x", 600) + ".yaml"
	for _, c := range []struct{ file, shown string }{
		{"a%0Ab%09c.yaml", `"file": "a?b?c.yaml"`},
		{long, `"file": "...` + long[len(long)-509:] + `"`},
	} {
		if code, got := d.post(t, "/v1/apply?dryRun=true&file="+c.file, "application/yaml", body); code != 400 || !strings.Contains(got, c.shown) {
			t.Errorf("file=%.20s: %d %s, want the diagnostics to name %s", c.file, code, got, c.shown)
		}
		good := "version: 1\nservices:\n- name: api\n  endpoints: [{address: 10.0.0.1, port: 80}]\n"
		if code, got := d.post(t, "/v1/apply?dryRun=true&file="+c.file, "application/yaml", good); code != 200 {
			t.Errorf("a valid document from file=%.20s: %d %s", c.file, code, got)
		}
	}
}

// A stored object is compiled from its stored body, not from a file
// anyone wrote: a refusal that names it gives its kind/name, not a line
// of a rendering no one has seen.
func TestRefusalOfAStoredObjectNamesNoLine(t *testing.T) {
	d := startServe(t)
	code, _, stderr := d.cli("delete", "resources.Cluster", "backend")
	want := `resources.RouteConfiguration/local: RouteConfiguration "local": virtual_hosts[0].routes[0].route.cluster: names Cluster "backend"`
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("delete of a cluster a route uses: exit %d, stderr:\n%s\nwant:\n%s", code, stderr, want)
	}
}
