package rollout

import (
	"strings"
	"testing"
)

// A halt's detail carries the NACKing proxy's error_detail, which may
// quote the config it refused, private keys included: the detail kept,
// saved and shown (GET /v1/rollouts, /status, pylon rollout status, the
// dashboard, the log) has key material redacted.
func TestHaltDetailRedactsKeyMaterial(t *testing.T) {
	c := running(t, Options{}, policy)
	in := stageNodesN(t, 1)
	e := nack(in[0])
	e.Detail = "cluster web: bad TLS context: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	c.Observe(&e)
	d := haltedFor(t, c)
	if strings.Contains(d, "MIIEvQ") || !strings.Contains(d, "cluster web: bad TLS context") {
		t.Fatalf("halted for %q: want the error with its key redacted", d)
	}
}
