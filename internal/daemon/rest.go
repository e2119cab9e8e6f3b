package daemon

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/xds"
)

// serveREST serves REST-JSON xDS polling when configured. Not built yet.
func serveREST(ctx context.Context, g *errgroup.Group, o Options, sec *security, srv *xds.Server, log *slog.Logger) error {
	return nil
}
