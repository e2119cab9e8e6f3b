package xds

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/peer"
)

// A tracked connection's write to a client that stops reading fails after
// the write bound instead of blocking the connection's writer for good;
// the registry closes a connection by the addresses a stream's peer has.
func TestTrackedConnections(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reg conns
	tl := &trackedListener{Listener: lis, reg: &reg, writeTimeout: 200 * time.Millisecond}
	defer tl.Close()
	client, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := tl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	// The client never reads: the kernel's buffers fill, then the write
	// must fail with a deadline error within the bound (not hang).
	chunk := make([]byte, 1<<20)
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		for range 1000 {
			if _, err := server.Write(chunk); err != nil {
				werr <- err
				return
			}
		}
		werr <- errors.New("a gigabyte written to a client that does not read")
	}()
	select {
	case err = <-werr:
	case <-time.After(10 * time.Second):
		server.Close() // unblocks the writer
		<-werr
		t.Fatal("a write to a client that does not read still blocks after 10s")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write ended with %v after %v, want a deadline error after about 200ms", err, time.Since(start))
	}

	// Closing by the stream's peer addresses closes the connection: the
	// client sees it end, and the registry forgets it.
	p := &peer.Peer{Addr: client.LocalAddr(), LocalAddr: client.RemoteAddr()}
	if !reg.close(keyOf(p)) {
		t.Fatal("the connection was not found by its peer addresses")
	}
	if reg.close(keyOf(p)) {
		t.Fatal("a closed connection is still tracked")
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	for {
		if _, err := client.Read(buf); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the client's connection stayed open")
			}
			break
		}
	}
}
