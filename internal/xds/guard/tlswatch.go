package guard

import (
	"crypto/tls"
	"errors"
	"net"
)

// ConnHandshake is a ConnectionClosed reason: the TLS handshake failed (no
// or a rejected client certificate, no common version or cipher, a
// client that sent no TLS, or gRPC's handshake timeout).
const ConnHandshake = "tls_handshake"

// tlsRecordHandshake is the first byte of a TLS server's first write (a
// handshake record); an HTTP/2 server's first frame (SETTINGS, at most
// 16 KiB by default) never starts with it.
const tlsRecordHandshake = 0x16

// ErrClientCAsChanged refuses a connection whose handshake verified its
// client certificate against client CAs that changed meanwhile to ones
// that do not trust it.
var ErrClientCAsChanged = errors.New("client certificate no longer trusted: the client CAs changed during the handshake")

// Handshake runs TLS's handshake on the connection (run: it returns the
// decrypted connection and the handshake's state) and returns that
// connection, watched: from here the frames are read above TLS, and the
// socket below only bounds writes and sees resets. The client certificate
// the handshake verified is kept, its expiry armed; when the client CAs
// changed during the handshake and no longer trust it, the connection is
// closed and ErrClientCAsChanged returned.
func (tc *Conn) Handshake(run func() (net.Conn, tls.ConnectionState, error)) (net.Conn, error) {
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
		return nil, ErrClientCAsChanged
	}
	return &plainConn{Conn: conn, tc: tc}, nil
}

// plainConn is a tracked connection above its TLS: gRPC reads and writes
// plaintext HTTP/2 here.
type plainConn struct {
	net.Conn
	tc *Conn
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
