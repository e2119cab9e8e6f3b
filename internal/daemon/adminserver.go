package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/pylon-xds/pylon/internal/certs"
)

// AdminLimits bound what clients of the admin API can hold: a client that
// sends half a request and stalls is cut off after ReadHeaderTimeout or
// ReadTimeout, and no more than MaxConns connections are served at once
// (the rest wait in the kernel's accept queue, holding no goroutine).
type AdminLimits struct {
	// ReadHeaderTimeout bounds the TLS handshake and the request headers
	// (default 5s); ReadTimeout the whole request with its body (30s).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds a response (default 2m: a CPU profile takes
	// 30s by default, and large dumps take a while on a slow link).
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections (default 2m). It is
	// longer than common clients keep a connection for reuse (Go's
	// http.Transport 90s), so that the client, not the server, closes an
	// idle connection: a server closing one just as a registrant reuses
	// it answers the registrant's POST with EOF, which HTTP clients do
	// not retry. An idle connection holds one of the MaxConns slots; that
	// cap, not this timeout, bounds what idling clients hold (a client
	// that asks for /healthz every few seconds holds its slot whatever
	// the timeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxConns bounds the connections served at once (default 2,048):
	// enough for a fleet's registrants to keep their connections alive
	// (1,000 of them at 10,000 registrations a second) with room for
	// operators and probes. What one holding them all costs, at worst:
	// about 80 KB a connection (64 KiB of headers being read, buffers, a
	// goroutine), 160 MB, plus the registrations' bodies in flight (64
	// MiB); and, as with any bound, the calls of everyone else wait for as
	// long as the connections are held (docs/security.md).
	MaxConns int
}

func (l *AdminLimits) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, 5*time.Second)
	def(&l.ReadTimeout, 30*time.Second)
	def(&l.WriteTimeout, 2*time.Minute)
	def(&l.IdleTimeout, 2*time.Minute)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 2048
	}
}

// newAdminServer is the admin HTTP server with its bounds, over TLS when
// tlsSrv is set.
func newAdminServer(h http.Handler, l AdminLimits, tlsSrv *certs.Server, log *slog.Logger) *http.Server {
	srv := &http.Server{
		// The server's own errors (failed handshakes, bad requests) are
		// the client's doing: at debug level, so that a client cannot
		// fill the log with them.
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		// No HTTP/2 on the admin port: HTTP/1.1 is all its clients need,
		// and one protocol is less to bound.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if tlsSrv != nil {
		srv.TLSConfig = tlsSrv.Config()
	}
	return srv
}

// serveAdmin serves until the server is shut down. The connection bound
// sits under TLS, so that a handshake holds a slot too (and is bounded by
// ReadHeaderTimeout).
func serveAdmin(srv *http.Server, lis net.Listener, l AdminLimits) error {
	lis = netutil.LimitListener(lis, l.MaxConns)
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(lis, "", "")
	} else {
		err = srv.Serve(lis)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin server: %w", err)
	}
	return nil
}
