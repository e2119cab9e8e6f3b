// Command pylon is an xDS control plane for Envoy fleets and proxyless gRPC.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
)

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, done := stopOnSignals(context.Background(), sigs, func() { signal.Stop(sigs) })
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	done()
	os.Exit(code)
}

// stopOnSignals returns a context that ends at the first signal on sigs
// (serve then hands its proxies over and stops gracefully) and carries a
// stop-now channel (daemon.WithStopNow) closed at the second (serve stops
// at once). After the second, release is called: signals are no longer
// caught, so a third takes the default action and ends the process,
// whatever it was doing. done stops the watching goroutine and releases
// the signals.
func stopOnSignals(parent context.Context, sigs <-chan os.Signal, release func()) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(parent)
	now := make(chan struct{})
	finished := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		defer release()
		select {
		case <-sigs:
			cancel()
		case <-finished:
			return
		}
		select {
		case <-sigs:
			close(now)
		case <-finished:
		}
	}()
	return daemon.WithStopNow(ctx, now), func() {
		close(finished)
		<-watched
		cancel()
	}
}
