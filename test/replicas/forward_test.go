package replicas_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// forwarder is the test's load balancer in front of the replicas: a
// loopback TCP proxy that sends each new connection to the first live
// replica of an ordered list, so that a client's single server address
// survives a replica's death. A replica is skipped once marked dead, or
// when it refuses the connection.
//
// Why not grpc-go's own list of xDS servers: its fallback (gRFC A71) leaves
// a failing primary only while some watched resource is not cached; with
// everything cached it stays and keeps retrying the dead primary
// (grpc-go v1.85 internal/xds/clients/xdsclient/authority.go, "Two
// conditions need to be met for fallback"). A proxy that already holds its
// config is exactly the one a failover must move, so the tests put one
// address in front of the replicas, as a deployment puts a load balancer
// or a DNS name.
type forwarder struct {
	t   *testing.T
	lis net.Listener

	mu       sync.Mutex
	backends []string
	dead     map[string]bool
	conns    map[net.Conn]struct{}
	routed   map[string]int // connections sent to each backend
	// rotate, once set by balance, starts each new connection's search
	// at the next backend in turn (round robin) rather than the first.
	rotate, next int
	closed       bool
	wg           sync.WaitGroup
}

// startForwarder listens on 127.0.0.1:0 and forwards to backends in order
// of preference, until the test ends.
func startForwarder(t *testing.T, backends ...string) *forwarder {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{t: t, lis: lis, backends: backends, dead: map[string]bool{}, conns: map[net.Conn]struct{}{}, routed: map[string]int{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// Addr is the address clients dial.
func (f *forwarder) Addr() string { return f.lis.Addr().String() }

// markDead makes new connections skip backend.
func (f *forwarder) markDead(backend string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[backend] = true
}

// balance makes the forwarder spread new connections over its live
// backends in turn, as a round-robin load balancer does, and adds
// backends to them (a scale-up).
func (f *forwarder) balance(backends ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rotate = 1
	f.backends = append(f.backends, backends...)
}

// routedTo is how many connections went to backend.
func (f *forwarder) routedTo(backend string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routed[backend]
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.lis.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

// track registers an open connection; false once the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

// serve connects c to the first live backend and copies both ways until
// either side ends, then closes both: a replica's death reaches the client
// as its connection's end.
func (f *forwarder) serve(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	defer c.Close()
	b := f.dial()
	if b == nil {
		return
	}
	if !f.track(b) {
		b.Close()
		return
	}
	defer f.untrack(b)
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	// Closing both ends the other copy.
	c.Close()
	b.Close()
	<-done
}

// dial opens a connection to the first backend that is not marked dead and
// accepts it.
func (f *forwarder) dial() net.Conn {
	f.mu.Lock()
	backends := append([]string(nil), f.backends...)
	if f.rotate > 0 {
		f.next = (f.next + 1) % len(backends)
		backends = append(backends[f.next:], backends[:f.next]...)
	}
	dead := make(map[string]bool, len(f.dead))
	for k, v := range f.dead {
		dead[k] = v
	}
	f.mu.Unlock()
	for _, addr := range backends {
		if dead[addr] {
			continue
		}
		b, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			continue
		}
		f.mu.Lock()
		f.routed[addr]++
		f.mu.Unlock()
		return b
	}
	return nil
}

// close stops accepting, ends every forwarded connection and waits for
// every goroutine.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.lis.Close()
	f.wg.Wait()
}
