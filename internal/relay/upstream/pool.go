package upstream

import (
	"strings"
	"sync"
	"unicode/utf8"

	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// maxDetail bounds the error_detail the relay sends up: a proxy's NACK
// message passed on must not make the relay's requests grow without end.
const maxDetail = 4 << 10

// errorDetail is msg as a NACK's error_detail, cut to maxDetail bytes on
// a character boundary: a string field protobuf will not encode (a cut
// through a character) would fail the send and drop the key's stream,
// and msg is mostly a downstream proxy's words.
func errorDetail(msg string) *rpcstatus.Status {
	if len(msg) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: strings.ToValidUTF8(msg, "\uFFFD")}
}

// DefaultMaxMessageBytes bounds one upstream response (64 MiB): a whole
// key's config, the first response after a restart, fits many times over.
const DefaultMaxMessageBytes = 64 << 20

// DefaultStreamsPerConnection is how many keys' streams share one
// upstream connection at most: under the upstream's own bound (Pylon's
// --max-streams-per-connection is 100 by default), past which gRPC would
// hold a new stream waiting for a slot, unanswered and unreported.
const DefaultStreamsPerConnection = 50

// Pool holds the connections to the upstream addresses, shared by the
// keys' streams, at most perConn streams on each: many streams, few
// connections, none past what the upstream accepts on one.
type Pool struct {
	creds    credentials.TransportCredentials
	maxBytes int
	perConn  int
	mu       sync.Mutex
	conns    map[string][]*pooled
}

// pooled is one connection and how many streams hold it.
type pooled struct {
	conn    *grpc.ClientConn
	streams int
}

// NewPool returns a pool dialing with creds (nil: plaintext), accepting
// responses of up to maxBytes (0: DefaultMaxMessageBytes) and putting at
// most perConn streams on a connection (0: DefaultStreamsPerConnection).
func NewPool(creds credentials.TransportCredentials, maxBytes, perConn int) *Pool {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	if perConn <= 0 {
		perConn = DefaultStreamsPerConnection
	}
	return &Pool{creds: creds, maxBytes: maxBytes, perConn: perConn, conns: map[string][]*pooled{}}
}

// Conn returns a connection to addr with room for one more stream, made
// when none has (gRPC connects and reconnects it lazily); release gives
// the room back when the stream ends.
func (p *Pool) Conn(addr string) (conn *grpc.ClientConn, release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pc *pooled
	for _, c := range p.conns[addr] {
		if c.streams < p.perConn {
			pc = c
			break
		}
	}
	if pc == nil {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.maxBytes)))
		if err != nil {
			return nil, nil, err
		}
		pc = &pooled{conn: c}
		p.conns[addr] = append(p.conns[addr], pc)
	}
	pc.streams++
	var once sync.Once
	return pc.conn, func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			pc.streams--
		})
	}, nil
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, cs := range p.conns {
		for _, c := range cs {
			c.conn.Close()
		}
		delete(p.conns, a)
	}
}
