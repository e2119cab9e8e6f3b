package daemon

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/xds"
)

// RESTOptions serve xDS as REST-JSON polling (rule X44, docs/rest.md) on a
// listener of its own, with the xDS TLS settings.
type RESTOptions struct {
	// Addr is where to listen; "" (the default) serves no REST: gRPC is
	// what Envoy and gRPC clients use, and a second port is a second door
	// to guard.
	Addr string
	// Wait is how long a poll whose client holds the current version waits
	// for a change before 304 Not Modified (0, the default: answer at
	// once, as Envoy's default request_timeout of 1s needs).
	Wait time.Duration
	// MaxPolls bounds the polls served at once (default 1024); beyond it a
	// poll gets 503 and Envoy polls again after its refresh_delay.
	MaxPolls int
}

// serveREST serves REST-JSON xDS polling when configured. Not built yet.
func serveREST(ctx context.Context, g *errgroup.Group, o Options, sec *security, srv *xds.Server, log *slog.Logger) error {
	return nil
}
