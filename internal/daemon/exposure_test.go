package daemon_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

// Findings 3 and 9 of issue 30, as an operator meets them: serving a
// config whose groups rest on claims no certificate proves logs which
// groups and fields, once.
func TestStartWarnsOfGroupsOpenToClaims(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(cfg, []byte(`version: 1
groups:
- name: payments
  match: { metadata: { team: payments } }
- name: edge
  default: true
  rollout: { stages: [{ share: 10% }] }
resources:
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: payments-ca
  validation_context: { trusted_ca: { inline_string: "not a key" } }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs daemontest.LogBuffer
	daemontest.Start(t, daemon.Options{
		ConfigPath: cfg, DataDir: filepath.Join(dir, "data"),
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}).Stop(t)
	out := logs.String()
	for _, want := range []string{
		`group \"payments\" holds 1 Secrets and declares no identities; it is picked by match.metadata.team`,
		`group \"edge\" has a rollout and declares no identities`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("the log has %d of %q:\n%s", strings.Count(out, want), want, out)
		}
	}
}
