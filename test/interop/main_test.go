// Package interop runs gRPC xDS clients other than grpc-go against Pylon:
// gRPC C-core (Debian's python3-grpcio) and grpc-js with @grpc/grpc-js-xds,
// each a subprocess bootstrapped with what `pylon bootstrap --grpc` prints,
// plus grpc-go in process on the same bootstrap. .ci/install-interop.sh
// installs the clients; without them the tests skip, except under CI=true,
// where they fail.
package interop

import (
	"testing"

	"go.uber.org/goleak"
)

// The daemon, the backends and grpc-go's xDS client must all stop when a
// test ends; the subprocess clients are waited for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
