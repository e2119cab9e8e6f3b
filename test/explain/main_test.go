// Package explain checks `pylon explain` against a real data plane: for a
// set of route configurations and requests, what explain says (clusters,
// shares, endpoints, or a failure) is where grpc-go's own xDS client, fed
// by a running Pylon, actually sends the RPCs.
package explain

import (
	"testing"

	"go.uber.org/goleak"
)

// The daemon, its streams and grpc-go's xDS clients must all stop when a
// test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc-go v1.85's xDS client builds its "tls" channel credentials
		// and drops the cleanup that would stop their file watcher
		// (internal/xds/xdsclient/clientimpl.go:268): one goroutine per
		// client for the life of the process, not ours to stop.
		goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run"),
	)
}
