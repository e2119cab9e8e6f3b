package xds

import (
	"time"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// connReports is the Server as the reporter of the connections Listener
// accepts.
type connReports struct{ s *Server }

func (r connReports) ConnClosed(tc *guard.Conn, reason string) { r.s.connClosed(tc, reason) }
func (r connReports) TransportRefused(tc *guard.Conn)          { r.s.transportRefused(tc) }

// connClosed logs and counts how a connection served on Listener ended.
// A client's close is routine (debug); every other end is the server's
// doing, and takes every stream on the connection with it: a warning,
// once per connection, under the client-triggered lines' rate limit.
func (s *Server) connClosed(tc *guard.Conn, reason string) {
	age := time.Since(tc.Opened()).Round(time.Millisecond).String()
	if reason == guard.ConnClientClosed {
		s.log.Debug("xDS connection closed by the client", "peer", tc.Key().Remote, "connected_for", age)
	} else if s.logged.first(onceKey("conn-closed", reason, tc.Key().Remote)) {
		attrs := []any{"reason", reason, "why", connReasonText(reason), "peer", tc.Key().Remote, "connected_for", age}
		if who := tc.ClientIdentity(); who != "" && (reason == guard.ConnClientCertRevoked || reason == guard.ConnClientCertExpired) {
			attrs = append(attrs, "client_cert", who)
		}
		s.log.Warn("xDS connection closed by the server: every stream on it ended", attrs...)
	}
	s.report(&status.Event{Kind: status.ConnectionClosed, Reason: reason, Peer: tc.Key().Remote, At: time.Now()})
}

// transportRefused logs and counts a stream gRPC refused on a connection
// already at its stream bound.
func (s *Server) transportRefused(tc *guard.Conn) {
	if s.logged.first(onceKey("transport-refused", tc.Key().Remote)) {
		s.log.Warn("xDS stream refused by gRPC: the connection is at its stream bound; the client may retry it",
			"reason", guard.TransportRefusedStreams, "max_streams_per_connection", s.opts.MaxStreamsPerConnection, "peer", tc.Key().Remote)
	}
	s.report(&status.Event{Kind: status.TransportRefused, Reason: guard.TransportRefusedStreams, Peer: tc.Key().Remote, At: time.Now()})
}

// connReasonText explains each reason a server ends a connection, for
// the operator who reads the log line.
func connReasonText(reason string) string {
	switch reason {
	case guard.ConnEvicted:
		return "a stream on it did not read a response within 3x --send-stall"
	case guard.ConnWriteDeadline:
		return "a socket write stayed blocked for 3x --send-stall: the client read nothing"
	case guard.ConnTooManyPings:
		return "gRPC's keepalive enforcement: the client pinged more often than allowed (GOAWAY ENHANCE_YOUR_CALM too_many_pings)"
	case guard.ConnGoAwayError:
		return "gRPC sent GOAWAY with an error (a protocol error by the client)"
	case guard.ConnGoAway:
		return "gRPC sent a graceful GOAWAY: maximum connection age, or the server stopping"
	case guard.ConnDrained:
		return "the replica is draining: its streams were handed over"
	case guard.ConnClientCertRevoked:
		return "its client certificate no longer verifies against the client CAs, which changed (--xds-client-ca): the client must connect again with a certificate they trust"
	case guard.ConnClientCertExpired:
		return "its client certificate (or a CA of its chain) expired: the client must connect again with a valid one"
	case guard.ConnHandshake:
		return "the TLS handshake failed: a missing or rejected client certificate, no common protocol, or no TLS at all"
	}
	return "gRPC's transport closed it without GOAWAY: a keepalive ping unanswered within its timeout, or a read or write error"
}
