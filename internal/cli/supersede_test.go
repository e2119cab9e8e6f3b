package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rolloutConfig is a file mode config whose default group rolls each
// change out in two stages that bake for an hour; timeout sets the
// cluster's connect_timeout, the change.
func rolloutConfig(timeout string) string {
	return `version: 1
groups:
- name: edge
  default: true
  rollout:
    stages:
    - { share: 10%, bake: 1h }
    - { share: 50%, bake: 1h }
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: web
  connect_timeout: ` + timeout + `
  type: STATIC
`
}

// pylon rollout supersede in file mode prints the state it leaves: the
// refused change is applied again at once and rolls out from stage 1, which
// is what the command says (not the halt it found).
func TestRolloutSupersedePrintsTheStateAfter(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeFile(t, cfg, rolloutConfig("1s"))
	d := startServe(t, "--config", cfg)
	writeFile(t, cfg, rolloutConfig("2s"))
	eventually(t, "the rollout at stage 1", func() bool { return strings.Contains(d.must(t, "rollout", "status"), "1/2") })
	if out := d.must(t, "rollout", "halt", "edge"); !strings.Contains(out, "halted (operator)") {
		t.Fatalf("rollout halt edge: %s", out)
	}
	// A change while halted is refused...
	writeFile(t, cfg, rolloutConfig("3s"))
	waitStatus(t, d, func(s string) bool { return strings.Contains(s, "halted") && strings.Contains(s, "REFUSED") })
	// ... until superseded: the command says where the new rollout is.
	out := d.must(t, "rollout", "supersede", "edge")
	if strings.TrimSpace(out) != "group edge: stage 1 of 2" {
		t.Fatalf("rollout supersede edge printed %q; want the new rollout's state, stage 1 of 2", out)
	}
}

// With the store nothing is pending: supersede says at once that the next
// write replaces the halted rollout.
func TestRolloutSupersedeInStoreMode(t *testing.T) {
	d := startServe(t)
	d.must(t, "apply", "-f", writeDoc(t, "v1.yaml", rolloutConfig("1s")))
	d.must(t, "apply", "-f", writeDoc(t, "v2.yaml", rolloutConfig("2s")))
	eventually(t, "the rollout at stage 1", func() bool { return strings.Contains(d.must(t, "rollout", "status"), "1/2") })
	d.must(t, "rollout", "halt", "edge")
	start := time.Now()
	out := d.must(t, "rollout", "supersede", "edge")
	if strings.TrimSpace(out) != "group edge: halted (operator) at stage 1; the next change supersedes it" || time.Since(start) >= supersedeWait {
		t.Fatalf("rollout supersede edge printed %q after %v", out, time.Since(start))
	}
	d.must(t, "apply", "-f", writeDoc(t, "v3.yaml", rolloutConfig("3s")))
	eventually(t, "the superseding rollout at stage 1", func() bool {
		out := d.must(t, "rollout", "status")
		return strings.Contains(out, "1/2") && !strings.Contains(out, "HALTED")
	})
}
