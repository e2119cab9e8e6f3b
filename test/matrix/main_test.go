// Package matrix is issue 30's combined-feature test: every transport
// (SotW and delta, ADS and per-type, REST-JSON) against every rollout
// state (none, mid-stage, halted) on one replica and on two sharing etcd,
// with an entitled node, an unentitled verified node and a client without
// a certificate, and private keys planted where features meet. It asserts
// who receives which key, and that no dump, log line, error or CLI output
// shows one.
package matrix

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
