package xds

import "crypto/x509"

// VerifyClients verifies the client certificate of every open connection
// accepted by Listener again, as its TLS handshake did (client auth usage,
// the current time), against pool: the client CAs after a rotation
// (certs.Server.Run reports them). A connection whose certificate no
// longer verifies is closed and every stream on it ends
// (client_cert_revoked, or client_cert_expired): a client whose CA was
// removed receives nothing more, not even a Secret rotated later, and its
// next handshake is against pool. A connection that still verifies keeps
// its streams, its expiry timer following the chain it verifies by now.
// Connections without a verified certificate are left as they are: they
// never had more than an unverified client gets.
//
// A nil pool trusts no CA (never the system's roots): every connection
// with a client certificate is closed.
func (s *Server) VerifyClients(pool *x509.CertPool) {
	s.conns.VerifyClients(pool)
}
