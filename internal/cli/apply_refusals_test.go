package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// post sends body to the admin API of d with the write token.
func (d *testPylon) post(t *testing.T, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+d.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readFile(t, filepath.Join(d.dataDir, "admin-token")))
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// apiErrorText is the error an API answer carries.
func apiErrorText(body string) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error
}

// An apply of a document that names no object is refused, as kubectl
// refuses it, dry run or not; a version other than 1 is refused with the
// message a file gets; nothing is stored either way.
func TestApplyRefusesEmptyDocumentAndOtherVersions(t *testing.T) {
	d := startServe(t)
	before := d.must(t, "history")
	for _, c := range []struct{ name, ct, body, want string }{
		{"empty", "application/yaml", "", "no objects passed to apply"},
		{"comments", "application/yaml", "# nothing yet\n\n# still nothing\n", "no objects passed to apply"},
		{"version only", "application/yaml", "version: 1\n", "no objects passed to apply"},
		{"empty lists", "application/yaml", "services: []\nresources: []\n", "no objects passed to apply"},
		{"empty json", "application/json", "{}", "no objects passed to apply"},
		{"version 2", "application/yaml", "version: 2\n" + shopConfig, "unsupported config version \"2\" (this Pylon reads version 1: write `version: 1`)"},
		{"version 1.0", "application/json", `{"version": 1.0, "services": [{"name": "a", "endpoints": [{"address": "10.0.0.1", "port": 80}]}]}`, "unsupported config version"},
		{"version list", "application/yaml", "version: [1]\n" + shopConfig, "must be the number 1"},
	} {
		for _, q := range []string{"", "?dryRun=true"} {
			code, body := d.post(t, "/v1/apply"+q, c.ct, c.body)
			if code != http.StatusBadRequest || !strings.Contains(apiErrorText(body), c.want) {
				t.Errorf("%s%s: %d %s; want 400 saying %q", c.name, q, code, body, c.want)
			}
		}
	}
	// The message names the field as a file's does.
	if _, body := d.post(t, "/v1/apply", "application/yaml", "version: 2\n"+shopConfig); !strings.Contains(body, `"field": "version"`) {
		t.Errorf("version 2: the diagnostic does not name the field: %s", body)
	}
	code, _, stderr := d.cli("apply", "-f", writeDoc(t, "empty.yaml", "# to do\n"))
	if code == 0 || !strings.Contains(stderr, "no objects passed to apply") {
		t.Errorf("pylon apply of a comments-only file: exit %d, %s", code, stderr)
	}
	if after := d.must(t, "history"); after != before {
		t.Fatalf("a refused apply changed the history:\n%s\nthen\n%s", before, after)
	}
	// The file path refuses version 2 with the same words.
	cfg := writeDoc(t, "v2.yaml", "version: 2\n"+shopConfig)
	if code, _, stderr := run("validate", cfg); code == 0 || !strings.Contains(stderr, "unsupported config version \"2\" (this Pylon reads version 1: write `version: 1`)") {
		t.Errorf("validate of a version 2 file: exit %d, %s", code, stderr)
	}
}
