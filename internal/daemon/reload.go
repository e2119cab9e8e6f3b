package daemon

import (
	"context"
	"log/slog"
	"os"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/token"
)

// reloadOn re-reads Pylon's files at each signal on sigs (SIGHUP, the
// usual way to ask a daemon to): the admin tokens and TLS certificates at
// once, and, through reread, the config in file mode or the secret files
// a stored config names. Everything it re-reads is also checked without a
// signal (token and certificate files at most once a second, when used;
// the config and secret files on file events and every --resync), so a
// signal only makes it happen now. A bad file keeps what is in force and
// is logged, as in a rotation. It returns when ctx ends.
func reloadOn(ctx context.Context, sigs <-chan os.Signal, reread chan<- struct{}, tokens *token.Files, sec *security, log *slog.Logger) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig := <-sigs:
			changed := tokens.Reload()
			for _, s := range []*certs.Server{sec.xdsTLS, sec.adminTLS} {
				if s != nil {
					s.Reload()
				}
			}
			// One pending re-read covers any number of signals.
			select {
			case reread <- struct{}{}:
			default:
			}
			log.Info("files re-read on a signal, serving continues: admin tokens and TLS certificates now, the config or its secret files next",
				"signal", sig.String(), "tokens_changed", changed)
		}
	}
}
