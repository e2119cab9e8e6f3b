package guard

import (
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/identity"
)

// Why the server closed a connection whose client certificate it had
// verified at the handshake (ConnectionClosed reasons).
const (
	// ConnClientCertRevoked: after the client CAs changed
	// (Conns.VerifyClients), the certificate no longer verifies: its CA
	// was removed from the bundle, or it lacks what the handshake requires.
	ConnClientCertRevoked = "client_cert_revoked"
	// ConnClientCertExpired: the certificate, or a certificate of its
	// verified chain, expired while the connection was open.
	ConnClientCertExpired = "client_cert_expired"
)

// clientCAs is what the server knows of the client CAs, for the
// connections it tracks: the pool of the last VerifyClients and how many
// times it changed, which a handshake that raced the change reads.
type clientCAs struct {
	gen  atomic.Uint64
	pool atomic.Pointer[x509.CertPool]
}

// clientCert is a tracked connection's verified client certificate: the
// chain the client sent and the timer that closes the connection when the
// chain expires (nil without a verified certificate).
type clientCert struct {
	mu     sync.Mutex
	sent   []*x509.Certificate // leaf first, then what the client offered as intermediates
	who    string              // what the certificate proves, for the log
	expiry *time.Timer
	until  time.Time // when the timer fires: the verified chains' expiry
	closed bool
}

// VerifyClients verifies the client certificate of every tracked
// connection again against pool (nil: no CA), closing those that no
// longer verify, and has handshakes under way verify against it too
// (xds.Server.VerifyClients).
func (c *Conns) VerifyClients(pool *x509.CertPool) {
	if pool == nil {
		pool = x509.NewCertPool()
	}
	// Pool first, then the generation: a handshake that finishes after
	// the walk below sees the generation change and verifies itself
	// against this pool (Conn.verified).
	c.cas.pool.Store(pool)
	c.cas.gen.Add(1)
	now := time.Now()
	for _, tc := range c.All() {
		if reason := tc.cert.reverify(pool, now, tc); reason != "" {
			tc.CloseAs(reason)
		}
	}
}

// verified records the connection's verified client certificate, from
// the state of a handshake that began at client CA generation gen, and
// arms its expiry. It returns the reason to refuse the connection when the
// client CAs changed during the handshake and the certificate does not
// verify against the new ones ("" otherwise, or without a certificate).
func (tc *Conn) verified(state tls.ConnectionState, gen uint64) string {
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return ""
	}
	c := &tc.cert
	c.mu.Lock()
	c.sent = state.PeerCertificates
	c.who = identity.FromState(state).String()
	c.arm(state.VerifiedChains, time.Now(), tc)
	c.mu.Unlock()
	if cas := &tc.reg.cas; cas.gen.Load() != gen {
		return c.reverify(cas.pool.Load(), time.Now(), tc)
	}
	return ""
}

// reverify verifies the certificate against pool at now, returning why it
// fails ("" when it verifies, or when there is none) and re-arming the
// expiry to the chains it verifies by now.
func (c *clientCert) reverify(pool *x509.CertPool, now time.Time, tc *Conn) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sent) == 0 || c.closed {
		return ""
	}
	chains, err := certs.VerifyClient(c.sent, pool, now)
	if certs.Expired(err) {
		return ConnClientCertExpired
	}
	if err != nil {
		return ConnClientCertRevoked
	}
	c.arm(chains, now, tc)
	return ""
}

// arm (re)sets the timer that closes the connection when the last of
// chains stops verifying: a chain is good until the first of its
// certificates expires. A timer, not a goroutine: nothing runs until it
// fires, and the connection's Close stops it.
func (c *clientCert) arm(chains [][]*x509.Certificate, now time.Time, tc *Conn) {
	if c.closed {
		return
	}
	end := certs.Expiry(chains)
	c.until = end
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.expiry = time.AfterFunc(end.Sub(now), func() { tc.CloseAs(ConnClientCertExpired) })
}

// stop stops the expiry timer for good: the connection is closing.
func (c *clientCert) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.expiry != nil {
		c.expiry.Stop()
	}
}

// ClientIdentity is what the connection's verified client certificate
// proves, for the log line of its close ("" without one).
func (c *Conn) ClientIdentity() string { return c.cert.identity() }

func (c *clientCert) identity() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.who
}

// ClientCertExpiry returns the soonest expiry among the tracked
// connections' verified client certificates, false when none has one.
func (c *Conns) ClientCertExpiry() (time.Time, bool) {
	var soonest time.Time
	for _, tc := range c.All() {
		if at := tc.cert.expires(); !at.IsZero() && (soonest.IsZero() || at.Before(soonest)) {
			soonest = at
		}
	}
	return soonest, !soonest.IsZero()
}

// expires is when the certificate's connection is closed for its expiry
// (zero without a verified certificate, or once the connection closes).
func (c *clientCert) expires() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return time.Time{}
	}
	return c.until
}
