package guard

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
)

// Conns tracks the xDS listener's connections by their address pair, so
// that the server can close the connection of a stream whose sends stay
// blocked: a client that stops reading leaves grpc-go's SendMsg waiting
// for flow-control window it never grants, and closing the connection is
// what reliably makes that SendMsg return.
type Conns struct {
	mu sync.Mutex
	m  map[Key]*Conn
	// cas are the client CAs the connections' certificates were last
	// verified against (VerifyClients).
	cas clientCAs
}

// Key is a connection's local and remote address: unique among open
// TCP connections, and what grpc's peer carries for a stream.
type Key struct{ Local, Remote string }

func (c *Conns) add(tc *Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[Key]*Conn{}
	}
	c.m[tc.key] = tc
}

func (c *Conns) remove(tc *Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[tc.key] == tc {
		delete(c.m, tc.key)
	}
}

// Evict closes the connection with key k as evicted, reporting whether it
// was tracked.
func (c *Conns) Evict(k Key) bool {
	tc := c.Get(k)
	if tc == nil {
		return false
	}
	tc.evicted.Store(true)
	tc.CloseAs(ConnEvicted)
	return true
}

// Get returns the tracked connection with key k, nil if none.
func (c *Conns) Get(k Key) *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// All returns the tracked connections.
func (c *Conns) All() []*Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Conn, 0, len(c.m))
	for _, tc := range c.m {
		out = append(out, tc)
	}
	return out
}

// Listener wraps l: every connection it accepts is registered in c, each
// write to it bounded by writeTimeout, and how it ended (and each stream
// its transport refused) told to report.
func (c *Conns) Listener(l net.Listener, writeTimeout time.Duration, report Reporter) net.Listener {
	return &listener{Listener: l, reg: c, writeTimeout: writeTimeout, report: report}
}

// KeyOf returns the connection key of a gRPC stream's peer ("" addresses
// when unknown).
func KeyOf(p *peer.Peer) Key {
	var k Key
	if p == nil {
		return k
	}
	if p.Addr != nil {
		k.Remote = p.Addr.String()
	}
	if p.LocalAddr != nil {
		k.Local = p.LocalAddr.String()
	}
	return k
}

// listener registers every connection it accepts. report, if set,
// hears how each connection ended and each stream the transport refused
// (Reporter).
type listener struct {
	net.Listener
	reg          *Conns
	writeTimeout time.Duration
	report       Reporter
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &Conn{Conn: c, reg: l.reg, writeTimeout: l.writeTimeout, report: l.report, opened: time.Now(),
		key: Key{Local: c.LocalAddr().String(), Remote: c.RemoteAddr().String()}}
	l.reg.add(tc)
	return tc, nil
}

// Conn is a connection Conns tracks (accepted by its Listener). It bounds
// every write: a client that stops reading TCP altogether fills its
// receive window and the kernel's buffers, and then a write would block
// the connection's writer forever.
type Conn struct {
	net.Conn
	reg          *Conns
	key          Key
	writeTimeout time.Duration
	// evicted is set when the server closed the connection because a
	// stream on it stopped reading: every stream on it ends evicted.
	evicted atomic.Bool
	report  Reporter
	opened  time.Time
	end     connEnd
	// frames follows what gRPC writes; only its writer (one at a time)
	// touches it. above is set when gRPC writes through TLS to this
	// connection (Handshake, which xds.Server.Credentials calls): the
	// watch then reads the plaintext above it, and this connection's
	// writes are TLS records.
	frames frameWatch
	above  atomic.Bool
	// handshaking is set while TLS's handshake runs on the connection: a
	// close meanwhile is the handshake failing.
	handshaking atomic.Bool
	// cert is the client certificate its handshake verified, if any.
	cert clientCert
}

func (c *Conn) Write(b []byte) (int, error) {
	if c.writeTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Write(b)
	if !c.above.Load() {
		c.frames.feed(b[:n], c.onFrame)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.end.set(ConnWriteDeadline)
	}
	return n, err
}

func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && !c.end.closing.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		// The client closed or reset it: gRPC's reader saw it first. (A
		// deadline is the server's own: gRPC's handshake timeout.)
		c.end.set(ConnClientClosed)
	}
	return n, err
}

// Key is the connection's local and remote address.
func (c *Conn) Key() Key { return c.key }

// Opened is when the connection was accepted.
func (c *Conn) Opened() time.Time { return c.opened }

// Evicted reports whether the connection was closed because a stream on it
// stopped reading (Conns.Evict): every stream on it ends evicted.
func (c *Conn) Evicted() bool { return c.evicted.Load() }

// CloseAs closes the connection for reason, unless it ended otherwise
// first.
func (c *Conn) CloseAs(reason string) {
	c.end.set(reason)
	_ = c.Close()
}

// Close closes the connection (gRPC's transport calls it too, once it is
// done with it) and reports, once, why it ended.
func (c *Conn) Close() error {
	if c.handshaking.Load() {
		c.end.set(ConnHandshake)
	}
	c.end.closing.Store(true)
	c.cert.stop()
	c.reg.remove(c)
	err := c.Conn.Close()
	if c.end.reported.CompareAndSwap(false, true) && c.report != nil {
		c.report.ConnClosed(c, c.end.reason())
	}
	return err
}
