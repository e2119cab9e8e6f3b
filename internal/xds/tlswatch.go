package xds

import (
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// Credentials wraps the xDS server's transport credentials (TLS) so that
// the connection watch (guard.Conn) reads what gRPC writes before it is
// encrypted: the watch tells why a connection ended from the HTTP/2
// GOAWAY and RST_STREAM frames gRPC writes, which on the socket of a
// TLS connection are ciphertext. Serve with
//
//	grpc.Creds(srv.Credentials(credentials.NewTLS(cfg)))
//
// and gRPC on srv.Listener. Without the wrapper a TLS connection is still
// tracked, evicted and bounded, but its end is told only from Pylon's own
// doing and the socket's errors (a GOAWAY reads as transport or
// client_closed, and a refused stream is not reported).
//
// The wrapper also keeps each connection's verified client certificate:
// the connection is closed when the certificate expires, and when it no
// longer verifies against the client CAs given to VerifyClients. Without
// it (or without Listener), a certificate is checked at the handshake
// only.
func (s *Server) Credentials(c credentials.TransportCredentials) credentials.TransportCredentials {
	return watchedCreds{c}
}

type watchedCreds struct {
	credentials.TransportCredentials
}

// ServerHandshake hands the tracked connection to c's handshake and
// returns the decrypted connection, watched (guard.Conn.Handshake).
func (w watchedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := raw.(*guard.Conn)
	if !ok {
		return w.TransportCredentials.ServerHandshake(raw)
	}
	var info credentials.AuthInfo
	conn, err := tc.Handshake(func() (net.Conn, tls.ConnectionState, error) {
		conn, ai, err := w.TransportCredentials.ServerHandshake(raw)
		info = ai
		if err != nil {
			return conn, tls.ConnectionState{}, err
		}
		return conn, tlsState(ai), nil
	})
	if errors.Is(err, guard.ErrClientCAsChanged) {
		return nil, nil, err
	}
	return conn, info, err
}

// tlsState is a handshake's TLS state (zero for other credentials).
func tlsState(info credentials.AuthInfo) tls.ConnectionState {
	switch ai := info.(type) {
	case credentials.TLSInfo:
		return ai.State
	case *credentials.TLSInfo:
		return ai.State
	}
	return tls.ConnectionState{}
}

func (w watchedCreds) Clone() credentials.TransportCredentials {
	return watchedCreds{w.TransportCredentials.Clone()}
}
