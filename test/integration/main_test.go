package integration

import (
	"testing"

	"go.uber.org/goleak"
)

// The daemon, the xDS streams and grpc-go's xDS client must all stop when a
// test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
