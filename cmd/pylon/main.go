// Command pylon is an xDS control plane for Envoy fleets and proxyless gRPC.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pylon-xds/pylon/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
