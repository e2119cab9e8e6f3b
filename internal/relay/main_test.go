package relay_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The relay's upstream streams, its xDS server and grpc-go's xDS client
// must all stop when a test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc-go's xDS client leaves its "tls" credentials' file watcher
		// running for the process's life (see test/integration).
		goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run"),
	)
}
