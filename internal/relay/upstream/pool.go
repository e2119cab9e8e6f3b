package upstream

import (
	"sync"

	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// maxDetail bounds the error_detail the relay sends up: a proxy's NACK
// message passed on must not make the relay's requests grow without end.
const maxDetail = 4 << 10

func errorDetail(msg string) *rpcstatus.Status {
	if len(msg) > maxDetail {
		msg = msg[:maxDetail]
	}
	return &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: msg}
}

// DefaultMaxMessageBytes bounds one upstream response (64 MiB): a whole
// key's config, the first response after a restart, fits many times over.
const DefaultMaxMessageBytes = 64 << 20

// Pool holds one connection per upstream address, shared by every key's
// stream: many streams, few connections.
type Pool struct {
	creds    credentials.TransportCredentials
	maxBytes int
	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
}

// NewPool returns a pool dialing with creds (nil: plaintext) and
// accepting responses of up to maxBytes (0: DefaultMaxMessageBytes).
func NewPool(creds credentials.TransportCredentials, maxBytes int) *Pool {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	return &Pool{creds: creds, maxBytes: maxBytes, conns: map[string]*grpc.ClientConn{}}
}

// Conn returns the connection to addr, made on first use (gRPC connects
// and reconnects it lazily).
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.maxBytes)))
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		c.Close()
		delete(p.conns, a)
	}
}
