// Package browser drives Pylon's dashboard (/ui/) in a real headless
// Chromium against a Pylon running in process on loopback, with scripted
// xDS clients connected, and checks what an operator sees.
//
// Chromium is Debian's (/usr/bin/chromium; .ci/run installs it). Without
// it the tests skip, saying so; with CI=true they fail instead.
//
// go test ./test/browser/ -update also writes the screenshots of each page
// to docs/dashboard/ (never on a normal run).
package browser

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

var (
	update = flag.Bool("update", false, "write the pages' screenshots to docs/dashboard/")
	fleet  = flag.Int("fleet", 0, "run TestLargeFleet with this many proxy streams (10000 for the figures in docs/dashboard.md)")
)

// The daemon, the xDS streams and the browser's connection must all stop
// when a test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
