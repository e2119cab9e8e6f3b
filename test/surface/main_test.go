// Package surface tests the less common xDS types end to end: ECDS
// (TypedExtensionConfig), RTDS (Runtime) and SRDS
// (ScopedRouteConfiguration), each from a config file through the real
// daemon to a scripted client over loopback gRPC, in state of the world
// and delta, on ADS and on the type's own service; their references are
// checked before publish and ordered on ADS.
package surface

import (
	"testing"

	"go.uber.org/goleak"
)

// The daemon and every stream must stop when a test ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
