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
