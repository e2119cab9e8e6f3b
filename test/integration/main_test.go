package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/pylon-xds/pylon/internal/cli"
)

// childEnv, when set, makes this test binary run `pylon` with the JSON list
// of arguments it holds instead of the tests: the crash test kills such a
// child with SIGKILL.
const childEnv = "PYLON_INTEGRATION_CHILD_ARGS"

// The daemon, the xDS streams and grpc-go's xDS client must all stop when a
// test ends.
func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx, args, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m,
		// grpc-go v1.85's xDS client builds its "tls" channel credentials
		// and drops the cleanup that would stop their file watcher
		// (internal/xds/xdsclient/clientimpl.go:268, `bundle, _, err :=
		// c.Build(cc.Config)`): one goroutine per client for the life of
		// the process, not ours to stop.
		goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run"),
	)
}
