package xds_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
)

// serverStreamGoroutines counts the goroutines running a stream's loop:
// those with the stream's run in their stack.
func serverStreamGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "pylon/internal/xds.run[") {
			count++
		}
	}
	return count
}

// Breakage caught: a stream keeping a second long-lived goroutine (one
// blocked in Recv beside the loop), about 4 KB of stack per proxy. Between
// events each open stream has one goroutine; a publish wakes each stream
// through a goroutine that ends once it pushed.
func TestOneGoroutinePerStream(t *testing.T) {
	e := setup(t, base()...)
	const n = 20
	var streams []*xdstest.Stream
	cc := xdstest.Dial(t, e.srv.Addr)
	for i := range n {
		s := xdstest.OpenADS(t, cc, xdstest.Node(fmt.Sprintf("n%d", i)))
		s.Request(cds)
		s.ACK(s.RecvType(cds))
		streams = append(streams, s)
	}
	e.srv.Publish(t, with(xdstest.Cluster("more"), xdstest.Endpoints("more", 1003))...)
	for _, s := range streams {
		wantNames(t, s.RecvType(cds), "a", "b", "more")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := serverStreamGoroutines()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines run the streams' loops, want %d: one a stream", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Breakage caught: a stream ended from outside (here the server's
// shutdown) while its one goroutine waits in Recv, with gRPC's own status
// (CANCELED, from ending the Recv) reaching the client instead of the
// stream's, or the stream's end not reported before the client sees it.
func TestStreamEndedWhileIdleSendsItsStatus(t *testing.T) {
	e := setup(t, base()...)
	s := e.ads(t, "idle")
	s.Request(cds)
	s.ACK(s.RecvType(cds))
	s.ExpectSilence()
	e.srv.XDS.Shutdown()
	if err := s.Err(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want UNAVAILABLE", err)
	}
	found := false
	for _, ev := range e.rec.all() {
		if ev.Kind == status.StreamClosed && ev.NodeID() == "idle" {
			found = true
		}
	}
	if !found {
		t.Fatal("the client saw the stream end before StreamClosed was reported")
	}
}
