package daemon

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// restCertMessage is what a REST client whose certificate no longer
// verifies is told.
const restCertMessage = "client certificate no longer verifies against the client CAs (they changed, or it expired): connect again"

// currentCert refuses a REST poll whose connection's client certificate
// no longer verifies against the client CAs being served: HTTP keeps a
// connection for many polls, each otherwise served as the connection's
// handshake verified it, after its CA was removed or it expired. The
// certificate is checked when the poll arrives and again when its answer
// is written, since a long poll may wait across a rotation. The refusal
// (403) closes the connection (HTTP/1.1's Connection: close, h2's
// GOAWAY), so the client's next poll handshakes against the CAs of the
// day. A connection is verified again only when the pool changed or its
// chain's expiry passed, not on every poll.
type currentCert struct {
	next http.Handler
	cas  func() *x509.CertPool
	log  *slog.Logger
}

// connCert is what a connection's certificate was last verified against,
// and until when that holds.
type connCert struct {
	mu      sync.Mutex
	pool    *x509.CertPool
	until   time.Time
	refused bool // logged
}

type connCertKey struct{}

// withConnCert gives each REST connection its verification record
// (http.Server.ConnContext).
func withConnCert(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connCertKey{}, &connCert{})
}

func (h currentCert) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	cc, _ := r.Context().Value(connCertKey{}).(*connCert)
	if cc == nil {
		cc = &connCert{}
	}
	if !h.verify(cc, r) {
		refuseCert(w)
		return
	}
	h.next.ServeHTTP(&certWriter{ResponseWriter: w, ok: func() bool { return h.verify(cc, r) }}, r)
}

// verify reports whether the request's client certificate verifies
// against the current client CAs, logging a refusal once per connection.
func (h currentCert) verify(cc *connCert, r *http.Request) bool {
	pool, now := h.cas(), time.Now()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.pool == pool && now.Before(cc.until) {
		return true
	}
	chains, err := certs.VerifyClient(r.TLS.PeerCertificates, pool, now)
	if err == nil {
		cc.pool, cc.until = pool, certs.Expiry(chains)
		return true
	}
	if !cc.refused {
		cc.refused = true
		reason := guard.ConnClientCertRevoked
		if certs.Expired(err) {
			reason = guard.ConnClientCertExpired
		}
		h.log.Warn("REST xDS poll refused and its connection closed: its client certificate no longer verifies against the client CAs",
			"reason", reason, "peer", r.RemoteAddr, "client_cert", identity.FromState(*r.TLS).String())
	}
	return false
}

func refuseCert(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.Error(w, restCertMessage, http.StatusForbidden)
}

// certWriter verifies the certificate again before a poll's answer is
// written, and writes the refusal instead when it no longer verifies.
type certWriter struct {
	http.ResponseWriter
	ok      func() bool
	checked bool
	refused bool
}

func (c *certWriter) WriteHeader(code int) {
	if !c.checked {
		c.checked = true
		if !c.ok() {
			c.refused = true
			// The handler's headers (a JSON content type) are not the
			// refusal's.
			clear(c.ResponseWriter.Header())
			refuseCert(c.ResponseWriter)
			return
		}
	}
	if !c.refused {
		c.ResponseWriter.WriteHeader(code)
	}
}

func (c *certWriter) Write(b []byte) (int, error) {
	if !c.checked {
		c.WriteHeader(http.StatusOK)
	}
	if c.refused {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection: xdsrest sets
// its body's read deadline through it, which a wrapper without Unwrap
// silently turns into no deadline.
func (c *certWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
