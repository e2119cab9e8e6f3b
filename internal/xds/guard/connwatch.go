package guard

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// Why a tracked connection ended (Conns.Listener): the bounded values of a
// ConnectionClosed event's Reason (a metric label).
const (
	// ConnClientClosed: the client closed or reset it.
	ConnClientClosed = "client_closed"
	// ConnEvicted: a stream on it left a response unread past three times
	// xds.Options.SendStall; every stream on it ended (refusal "stalled").
	ConnEvicted = "evicted"
	// ConnWriteDeadline: one write to its socket stayed blocked past three
	// times xds.Options.SendStall (the client read nothing at all meanwhile).
	ConnWriteDeadline = "write_deadline"
	// ConnTooManyPings: gRPC's keepalive enforcement sent GOAWAY
	// ENHANCE_YOUR_CALM ("too_many_pings") and closed it: the client
	// pinged more often than the server's keepalive policy allows.
	ConnTooManyPings = "too_many_pings"
	// ConnGoAwayError: gRPC sent GOAWAY with an error code other than
	// ENHANCE_YOUR_CALM (a protocol error by the client) and closed it.
	ConnGoAwayError = "goaway_error"
	// ConnGoAway: gRPC sent a graceful GOAWAY (NO_ERROR) first: the
	// connection reached its maximum age, or the gRPC server stopped.
	ConnGoAway = "goaway"
	// ConnDrained: xds.Server.Drain closed it after its streams were handed over.
	ConnDrained = "drained"
	// ConnBalanced: the server refused or shed its stream to balance the
	// fleet across replicas (xds.Balance), and closed it so that its
	// client reconnects, possibly to another replica.
	ConnBalanced = "balanced"
	// ConnOtherShard: the server refused its stream because the node's
	// group is another shard's (xds.Shard), and closed it so that its
	// client reconnects, possibly to that shard.
	ConnOtherShard = "other_shard"
	// ConnTransport: gRPC's transport closed it without GOAWAY: a
	// keepalive ping unanswered within its timeout, or a read or write
	// error.
	ConnTransport = "transport"
)

// TransportRefusedStreams is the reason of a TransportRefused event: gRPC
// refused a new stream with RST_STREAM REFUSED_STREAM because the
// connection already had xds.Options.MaxStreamsPerConnection streams. The
// client may retry it (grpc-go does, transparently); Pylon never saw it.
const TransportRefusedStreams = "max_streams"

// HTTP/2 frame types and error codes the watch reads (RFC 9113).
const (
	frameRSTStream      = 0x3
	frameGoAway         = 0x7
	codeRefusedStream   = 0x7
	codeEnhanceYourCalm = 0xb
)

// Reporter hears how each tracked connection ended and each stream
// its transport refused: the xDS server, which logs and counts them.
type Reporter interface {
	ConnClosed(tc *Conn, reason string)
	TransportRefused(tc *Conn)
}

// connEnd records why a connection is ending: the first reason set by
// whoever saw it (Read, Write, an eviction, a drain) and the GOAWAY gRPC
// wrote, if any.
type connEnd struct {
	mu        sync.Mutex
	first     string
	goAway    uint32
	sawGoAway bool
	// closing is set once Close began: a read error after it is the
	// close, not the client. reported makes the report once.
	closing, reported atomic.Bool
}

func (e *connEnd) set(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == "" {
		e.first = reason
	}
}

// sentGoAway records a GOAWAY's error code; an error outranks NO_ERROR
// (gRPC's graceful close sends NO_ERROR first, and may error later).
func (e *connEnd) sentGoAway(code uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.sawGoAway || code != 0 {
		e.goAway = code
	}
	e.sawGoAway = true
}

// reason says why the connection ended. What Pylon decided (eviction,
// write deadline, drain) comes first; then a GOAWAY gRPC sent, which
// explains a client's close that follows it; then the client's close;
// and a close nobody explained is gRPC's transport's own.
func (e *connEnd) reason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.first != "" && e.first != ConnClientClosed:
		return e.first
	case e.sawGoAway && e.goAway == codeEnhanceYourCalm:
		return ConnTooManyPings
	case e.sawGoAway && e.goAway != 0:
		return ConnGoAwayError
	case e.sawGoAway:
		return ConnGoAway
	case e.first == ConnClientClosed:
		return ConnClientClosed
	}
	return ConnTransport
}

// frameWatch follows the HTTP/2 frames the server writes on a connection,
// reading only their 9-byte headers and the error code of RST_STREAM and
// GOAWAY frames. grpc-go says nothing to the application when its
// transport refuses a stream (MaxConcurrentStreams) or sends GOAWAY
// (keepalive enforcement), and then closes the connection: the frames on
// the wire are the only record. A server connection's bytes are frames
// from the first (the server's preface is a SETTINGS frame).
type frameWatch struct {
	// started is set by the first write; off when that write was TLS
	// (credentials not wrapped by xds.Server.Credentials): ciphertext has no
	// frames to read, and guessing at them would invent reasons.
	started, off bool

	hdr  [9]byte
	nhdr int
	// left is what remains of the current frame's payload; code collects
	// the first want bytes of it, for the frames whose error code is read.
	left  int
	typ   byte
	code  [8]byte
	ncode int
	want  int
}

// feed reads b, the next bytes written, calling on with each RST_STREAM's
// and GOAWAY's type and error code.
func (f *frameWatch) feed(b []byte, on func(typ byte, code uint32)) {
	if !f.started && len(b) > 0 {
		f.started, f.off = true, b[0] == tlsRecordHandshake
	}
	for len(b) > 0 && !f.off {
		if f.nhdr < len(f.hdr) {
			n := copy(f.hdr[f.nhdr:], b)
			f.nhdr += n
			b = b[n:]
			if f.nhdr == len(f.hdr) {
				f.start()
			}
			continue
		}
		if f.ncode < f.want {
			n := copy(f.code[f.ncode:f.want], b)
			f.ncode += n
			f.left -= n
			b = b[n:]
			if f.ncode == f.want {
				on(f.typ, binary.BigEndian.Uint32(f.code[f.want-4:f.want]))
			}
		} else {
			n := min(f.left, len(b))
			f.left -= n
			b = b[n:]
		}
		if f.left == 0 {
			f.nhdr = 0
		}
	}
}

// start begins a frame whose header is complete.
func (f *frameWatch) start() {
	f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
	f.typ, f.ncode, f.want = f.hdr[3], 0, 0
	switch f.typ {
	case frameRSTStream:
		f.want = 4 // the error code
	case frameGoAway:
		f.want = 8 // the last stream id, then the error code
	}
	if f.want > f.left {
		f.want = 0 // malformed: not ours to judge, skip it
	}
	if f.left == 0 {
		f.nhdr = 0
	}
}

// onFrame hears the RST_STREAM and GOAWAY frames written on c.
func (c *Conn) onFrame(typ byte, code uint32) {
	switch {
	case typ == frameGoAway:
		c.end.sentGoAway(code)
	case typ == frameRSTStream && code == codeRefusedStream && c.report != nil:
		c.report.TransportRefused(c)
	}
}
