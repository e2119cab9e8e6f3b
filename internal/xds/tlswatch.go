package xds

import (
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// ConnHandshake is a ConnectionClosed reason: the TLS handshake failed (no
// or a rejected client certificate, no common version or cipher, a
// client that sent no TLS, or gRPC's handshake timeout).
const ConnHandshake = "tls_handshake"

// tlsRecordHandshake is the first byte of a TLS server's first write (a
// handshake record); an HTTP/2 server's first frame (SETTINGS, at most
// 16 KiB by default) never starts with it.
const tlsRecordHandshake = 0x16

// Credentials wraps the xDS server's transport credentials (TLS) so that
// the connection watch (connwatch.go) reads what gRPC writes before it is
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
// returns the decrypted connection, watched (trackedConn.Handshake).
func (w watchedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := raw.(*trackedConn)
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
	if errors.Is(err, errClientCAsChanged) {
		return nil, nil, err
	}
	return conn, info, err
}

// errClientCAsChanged refuses a connection whose handshake verified its
// client certificate against client CAs that changed meanwhile to ones
// that do not trust it.
var errClientCAsChanged = errors.New("client certificate no longer trusted: the client CAs changed during the handshake")

// Handshake runs TLS's handshake on the connection (run: it returns the
// decrypted connection and the handshake's state) and returns that
// connection, watched: from here the frames are read above TLS, and the
// socket below only bounds writes and sees resets. The client certificate
// the handshake verified is kept, its expiry armed; when the client CAs
// changed during the handshake and no longer trust it, the connection is
// closed and errClientCAsChanged returned.
func (tc *trackedConn) Handshake(run func() (net.Conn, tls.ConnectionState, error)) (net.Conn, error) {
	// Before the handshake writes: what goes on the socket now is
	// TLS records, never frames.
	tc.above.Store(true)
	// A failed handshake closes the connection before it returns.
	tc.handshaking.Store(true)
	gen := tc.reg.cas.gen.Load()
	conn, state, err := run()
	tc.handshaking.Store(false)
	if err != nil {
		tc.end.set(ConnHandshake)
		return conn, err
	}
	if reason := tc.verified(state, gen); reason != "" {
		// The client CAs changed while the handshake ran, from a pool
		// that still trusted this certificate to one that does not.
		tc.end.set(reason)
		_ = conn.Close()
		return nil, errClientCAsChanged
	}
	return &plainConn{Conn: conn, tc: tc}, nil
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

// plainConn is a tracked connection above its TLS: gRPC reads and writes
// plaintext HTTP/2 here.
type plainConn struct {
	net.Conn
	tc *trackedConn
}

func (c *plainConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	// gRPC's writer is the only one here: the frames are its.
	c.tc.frames.feed(b[:n], c.tc.onFrame)
	return n, err
}

// Read marks the client's close: a TLS client ends with close_notify, which
// ends reads here while the socket below reads no error.
func (c *plainConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && !c.tc.end.closing.Load() {
		c.tc.end.set(ConnClientClosed)
	}
	return n, err
}

// Close sends TLS's close_notify and closes the socket, which reports.
func (c *plainConn) Close() error {
	c.tc.end.closing.Store(true)
	err := c.Conn.Close()
	// The TLS layer closes the socket in every case; closing the tracked
	// connection again only makes sure it is reported.
	_ = c.tc.Close()
	return err
}
