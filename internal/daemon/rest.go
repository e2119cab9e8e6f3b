package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/loopback"
	"github.com/pylon-xds/pylon/internal/xds"
	"github.com/pylon-xds/pylon/internal/xdsrest"
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
	// once, as Envoy's default request_timeout of 1s needs; at most
	// xdsrest.MaxWait).
	Wait time.Duration
	// MaxPolls bounds the polls served at once (default 1024); beyond it a
	// poll gets 503 and Envoy polls again after its refresh_delay.
	MaxPolls int
	// AllowedHosts are host names polls may be addressed to (their Host
	// header) beyond localhost, IP addresses and names without dots
	// (xdsrest's guard against DNS rebinding).
	AllowedHosts []string
	// OnListen, if set, is called with the bound address (tests bind
	// 127.0.0.1:0).
	OnListen func(addr string)
}

// Bounds of the REST server beyond the handler's own: a client that sends
// half a request is cut off, and idle keep-alive connections are closed
// after 30s (Envoy polls every refresh_delay, 1s by default, on one; an
// idle connection holds one of restMaxConns).
const (
	restReadHeaderTimeout = 5 * time.Second
	restReadTimeout       = 10 * time.Second
	restIdleTimeout       = 30 * time.Second
	restMaxHeaderBytes    = 64 << 10
	// restMaxConns bounds the connections held at once; more wait in the
	// kernel's accept queue.
	restMaxConns = 4096
	// restStopGrace bounds how long a stop waits for polls in flight; the
	// xDS server's shutdown has ended their streams by then.
	restStopGrace = 5 * time.Second
)

// checkREST checks the REST options with the other start-up checks, before
// anything is read or bound.
func checkREST(o Options, sec *security, log *slog.Logger) error {
	ro := o.REST
	if ro.Addr == "" {
		return nil
	}
	if ro.Wait < 0 || ro.Wait > xdsrest.MaxWait {
		return fmt.Errorf("--xds-rest-wait is %s; it must be between 0 and %s", ro.Wait, xdsrest.MaxWait)
	}
	if ro.MaxPolls < 0 {
		return fmt.Errorf("--xds-rest-max-polls is %d; it must be 0 (the default, %d) or more", ro.MaxPolls, xdsrest.DefaultMaxPolls)
	}
	for _, h := range ro.AllowedHosts {
		if err := checkHostName(h); err != nil {
			return fmt.Errorf("--xds-rest-allowed-host %q: %w", h, err)
		}
	}
	switch {
	case o.InsecureServeSecrets:
		log.Warn("INSECURE: --insecure-serve-secrets serves Secrets, private keys included, to REST polls without a verified client certificate too: "+
			"anyone who reaches the REST port can read every key of the group it claims", "xds_rest", ro.Addr, "tls", sec.xdsTLS != nil)
	case !loopback.Is(ro.Addr) && sec.xdsTLS == nil:
		log.Warn("REST-JSON xDS in plaintext beyond this host: any client that reaches this port can claim any node id and read its config, "+
			"and no client can prove who it is, so no Secret is served; use --xds-tls-cert, --xds-tls-key and --xds-client-ca", "xds_rest", ro.Addr)
	}
	return nil
}

// listenREST binds the REST listener when one is configured (nil
// otherwise), next to the xDS and admin listeners.
func listenREST(o Options) (net.Listener, error) {
	if o.REST.Addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", o.REST.Addr)
	if err != nil {
		return nil, fmt.Errorf("REST xDS listener (--xds-rest-addr): %w", err)
	}
	return lis, nil
}

// serveREST serves REST-JSON xDS polling on lis (nil: not configured) until
// ctx ends.
func serveREST(ctx context.Context, g *errgroup.Group, o Options, lis net.Listener, sec *security, srv *xds.Server, log *slog.Logger) {
	if lis == nil {
		return
	}
	ro := o.REST
	h := xdsrest.New(xdsrest.Options{
		Server: srv, Logger: log, Wait: ro.Wait, MaxPolls: ro.MaxPolls, MaxResourceNames: o.MaxResourceNames, AllowedHosts: ro.AllowedHosts,
	})
	hs := &http.Server{
		Handler: h,
		// The server's own errors (failed handshakes, bad requests) are
		// the client's doing: debug level, so a client cannot fill the log.
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ReadHeaderTimeout: restReadHeaderTimeout,
		ReadTimeout:       restReadTimeout,
		WriteTimeout:      ro.Wait + restReadTimeout,
		IdleTimeout:       restIdleTimeout,
		MaxHeaderBytes:    restMaxHeaderBytes,
	}
	if sec.xdsTLS != nil {
		// The xDS config offers h2 only in ALPN; Go's TLS server still
		// accepts a client that offers only http/1.1 (as an Envoy cluster
		// with alpn_protocols set to it would), and one offering nothing.
		hs.TLSConfig = sec.xdsTLS.Config()
		if o.XDSTLS.ClientCA != "" {
			hs.Handler = currentCert{next: h, cas: sec.xdsTLS.ClientCAs, log: log}
			hs.ConnContext = withConnCert
		}
	}
	limited := netutil.LimitListener(lis, restMaxConns)
	g.Go(func() error {
		var err error
		if hs.TLSConfig != nil {
			err = hs.ServeTLS(limited, "", "")
		} else {
			err = hs.Serve(limited)
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("REST xDS server: %w", err)
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), restStopGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			// Polls still waiting: their connections close now, which
			// ends them.
			_ = hs.Close()
		}
		return nil
	})
	log.Info("REST-JSON xDS serving", "xds_rest", lis.Addr().String(), "tls", sec.xdsTLS != nil, "wait", ro.Wait.String(), "max_polls", ro.MaxPolls)
	if ro.OnListen != nil {
		ro.OnListen(lis.Addr().String())
	}
}

// checkHostName checks a name given to --xds-rest-allowed-host: a plain
// DNS name, which the Host header of a poll must equal (any port).
func checkHostName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("give a host name of 1 to 253 characters")
	}
	for _, c := range h {
		ok := c == '.' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !ok {
			return fmt.Errorf("%q is not allowed in a host name: give the name alone, without a scheme, port or wildcard", c)
		}
	}
	return nil
}
