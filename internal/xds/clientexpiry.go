package xds

import "time"

// ClientCertExpiry returns the soonest expiry among the verified client
// certificates of the connections open now (each certificate's verified
// chain: the moment its connection is closed as client_cert_expired), and
// false when no open connection has one. For the certificate expiry
// metric: a walk of the open connections, each under its own lock.
func (s *Server) ClientCertExpiry() (time.Time, bool) {
	return s.conns.ClientCertExpiry()
}

// ClientCertExpiry returns the soonest expiry among the tracked
// connections' verified client certificates, false when none has one.
func (c *conns) ClientCertExpiry() (time.Time, bool) {
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
