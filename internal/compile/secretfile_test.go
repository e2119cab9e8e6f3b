package compile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/secretfile"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// With a confined reader, a secret file outside the secret directories is
// refused with the secret, the field and the path named, and the way out.
func TestSecretFilesConfined(t *testing.T) {
	root := t.TempDir()
	certs, etc := filepath.Join(root, "certs"), filepath.Join(root, "etc")
	for _, d := range []string{certs, etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{"certs/api.crt": "CERT", "certs/api.key": "KEY", "etc/passwd": "root:x:0:0"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(etc, "passwd"), filepath.Join(certs, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	r, err := secretfile.New([]string{certs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := `secrets:
- { name: api-cert, cert_file: api.crt, key_file: ` + filepath.Join(etc, "passwd") + ` }
- { name: up, cert_file: ../etc/passwd, key_file: api.key }
- { name: ca, ca_file: ca.crt }
- { name: env, ca_file: /proc/self/environ }
`
	_, err = Compile(xdstype.New(), []config.File{{Path: filepath.Join(certs, "pylon.yaml"), Data: []byte(doc), Dir: certs}}, r.Read)
	var dl diag.List
	if !errors.As(err, &dl) {
		t.Fatalf("compile: %v", err)
	}
	want := map[string]string{
		"api-cert key_file": filepath.Join(etc, "passwd") + " is outside the secret directories (" + certs + "); allow it with --secret-dir",
		"up cert_file":      `/../etc/passwd contains ".."`,
		"ca ca_file":        "leaves the secret directories through a symlink",
		"env ca_file":       "/proc/self/environ is under /proc",
	}
	got := map[string]string{}
	for _, d := range dl {
		got[d.Name+" "+d.Field] = d.Message
		if strings.Contains(d.Message, "root:x") {
			t.Errorf("a diagnostic shows a refused file's contents: %s", d)
		}
	}
	for k, w := range want {
		if !strings.Contains(got[k], w) {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if len(dl) != len(want) {
		t.Errorf("diagnostics: %v", dl)
	}
}

// Objects from the store have no folder: a relative path resolves against
// the first secret directory, not the server's working directory.
func TestStoreRelativePathsUseFirstSecretDir(t *testing.T) {
	certs := t.TempDir()
	for _, n := range []string{"api.crt", "api.key"} {
		if err := os.WriteFile(filepath.Join(certs, n), []byte("PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := secretfile.New([]string{t.TempDir(), certs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"secrets": [{"name": "api-cert", "cert_file": "api.crt", "key_file": "api.key"}]}`
	files := []config.File{{Path: "secrets/api-cert", Data: []byte(doc)}}
	if _, err := Compile(xdstype.New(), files, r.Read); err == nil || !strings.Contains(err.Error(), "api.crt") {
		t.Fatalf("first secret dir is empty, want a missing-file error naming api.crt: %v", err)
	}
	r, err = secretfile.New([]string{certs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(xdstype.New(), files, r.Read); err != nil {
		t.Fatal(err)
	}
}
