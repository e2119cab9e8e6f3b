package guard

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
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
	var reg Conns
	rep := &reports{}
	tl := &listener{Listener: lis, reg: &reg, writeTimeout: 200 * time.Millisecond, report: rep}
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
	if !reg.Evict(KeyOf(p)) {
		t.Fatal("the connection was not found by its peer addresses")
	}
	if reg.Evict(KeyOf(p)) {
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
	// It ended because a write blocked past the bound, whoever closed it
	// then, and that is said once.
	server.Close()
	if got := rep.get(); len(got) != 1 || got[0] != ConnWriteDeadline {
		t.Fatalf("reported %v, want one %s", got, ConnWriteDeadline)
	}
}

// reports records what a listener reports.
type reports struct {
	mu      sync.Mutex
	reasons []string
	refused int
}

func (r *reports) ConnClosed(_ *Conn, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *reports) TransportRefused(*Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused++
}

func (r *reports) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

// The frame watch finds every RST_STREAM's and GOAWAY's error code however
// gRPC's writes cut the frames, and nothing in the payloads of others.
func TestFrameWatchAcrossWrites(t *testing.T) {
	frame := func(typ byte, payload ...byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, 0, 0, 0, 0, 1}, payload...)
	}
	// A DATA frame whose payload looks like a GOAWAY header must be skipped.
	decoy := frame(0x0, frame(frameGoAway, 0, 0, 0, 1, 0, 0, 0, codeEnhanceYourCalm)...)
	var wire []byte
	wire = append(wire, frame(0x4)...) // SETTINGS, empty
	wire = append(wire, decoy...)
	wire = append(wire, frame(frameRSTStream, 0, 0, 0, codeRefusedStream)...)
	wire = append(wire, frame(0x6, 1, 2, 3, 4, 5, 6, 7, 8)...) // PING
	wire = append(wire, frame(frameGoAway, 0, 0, 0, 3, 0, 0, 0, codeEnhanceYourCalm, 't', 'o', 'o')...)
	want := []string{"3:7", "7:11"}
	for cut := 1; cut <= len(wire); cut++ {
		var f frameWatch
		var got []string
		for b := wire; len(b) > 0; {
			n := min(cut, len(b))
			f.feed(b[:n], func(typ byte, code uint32) { got = append(got, fmt.Sprintf("%d:%d", typ, code)) })
			b = b[n:]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("writes of %d bytes: saw %v, want %v", cut, got, want)
		}
	}
}
