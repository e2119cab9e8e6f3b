package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

// serve wires --secret-dir: by default only the config's folder is read;
// another folder must be named; Pylon's data folder never is.
func TestSecretDirsWired(t *testing.T) {
	root := t.TempDir()
	conf, elsewhere, data := filepath.Join(root, "conf"), filepath.Join(root, "elsewhere"), filepath.Join(root, "data")
	for _, d := range []string{conf, elsewhere, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{elsewhere, data} {
		writeAtomically(t, filepath.Join(d, "tls.crt"), "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
		writeAtomically(t, filepath.Join(d, "tls.key"), "-----BEGIN PRIVATE KEY-----\nY\n-----END PRIVATE KEY-----\n")
	}
	config := func(dir string) string {
		cfg := filepath.Join(conf, "pylon.yaml")
		writeAtomically(t, cfg, strings.ReplaceAll(`secrets:
- { name: edge-cert, cert_file: DIR/tls.crt, key_file: DIR/tls.key }
`, "DIR", dir))
		return cfg
	}

	err := daemontest.Refusal(t, daemon.Options{ConfigPath: config(elsewhere), DataDir: data})
	if err == nil || !strings.Contains(err.Error(), "edge-cert") || !strings.Contains(err.Error(), "--secret-dir") {
		t.Fatalf("a secret outside the config's folder: %v", err)
	}

	p, _ := runPylon(t, daemon.Options{ConfigPath: config(elsewhere), DataDir: data, SecretDirs: []string{elsewhere}})
	if !strings.Contains(p.get(t, "/config"), "edge-cert") {
		t.Fatal("with --secret-dir the Secret is served")
	}

	// The data folder (tokens, store) is refused even under a secret dir.
	err = daemontest.Refusal(t, daemon.Options{ConfigPath: config(data), DataDir: data, SecretDirs: []string{root}})
	if err == nil || !strings.Contains(err.Error(), `secret "edge-cert": cert_file`) || !strings.Contains(err.Error(), "never reads") {
		t.Fatalf("a secret in Pylon's data folder: %v", err)
	}

	// Pylon's own TLS key, beside the config, is not a secret to serve.
	ca := certstest.NewCA(t, "ca")
	own := ca.Issue(t, certstest.Server("pylon")).Write(t, ca, conf, "tls")
	err = daemontest.Refusal(t, daemon.Options{ConfigPath: config(conf), DataDir: data, XDSTLS: daemon.TLSFiles{Cert: own.Cert, Key: own.Key}})
	if err == nil || !strings.Contains(err.Error(), `secret "edge-cert": key_file`) || strings.Contains(err.Error(), "cert_file") {
		t.Fatalf("Pylon's xDS key served as a secret: %v", err)
	}
}
