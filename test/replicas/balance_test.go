package replicas_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/guard"
)

// Issue 33 item 2's must-show, at the scale of a test: a fleet of scripted
// Envoys, half delta and half SotW, all on replica A behind a round-robin
// balancer (each reconnect goes to the next replica); replica B starts.
// Within a bounded time each replica holds at most its target, without an
// operator or a connection age: A refused new streams over its share and
// shed its excess, delta streams only (there were enough of them), whose
// clients resumed on B with nothing resent. No proxy lost its config.
func TestScaleUpBalancesTheLoad(t *testing.T) {
	const half = 12
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	shed := []string{"--shed-rate", "20"}
	a := f.start("replica-a", shed...)
	version := a.apply(greeterDoc(startBackend(t, "backend-1"))).Version
	sameVersion(t, []*replica{a}, version)
	lb := startForwarder(t, a.xdsAddr)
	var envoys []*envoy
	for i := range 2 * half {
		e := startEnvoy(t, lb.Addr(), fmt.Sprintf("envoy-balance-%d", i), i%2 == 0)
		envoys = append(envoys, e)
	}
	for _, e := range envoys {
		e.ready("backend", "greeter")
	}
	if on := servedBy(envoys, a.id); on != 2*half {
		t.Fatalf("%d of %d proxies on %s before the scale-up", on, 2*half, a.id)
	}
	before := make([][2]int, len(envoys))
	streams := make([]int, len(envoys))
	for i, e := range envoys {
		before[i][0], before[i][1] = e.received()
		streams[i] = e.streamCount()
	}

	b := f.start("replica-b", shed...)
	sameVersion(t, []*replica{a, b}, version)
	lb.balance(b.xdsAddr)
	scaled := time.Now()
	target, _ := guard.Load{Replicas: 2, Streams: 2 * half, Fresh: true}.Target()
	deadline := scaled.Add(bound)
	for on := servedBy(envoys, a.id); on > target || servedBy(envoys, a.id)+servedBy(envoys, b.id) != 2*half; on = servedBy(envoys, a.id) {
		if time.Now().After(deadline) {
			t.Fatalf("%v after the scale-up, %s serves %d proxies and %s %d; want at most %d each, all %d served\n%s",
				time.Since(scaled).Round(time.Millisecond), a.id, on, b.id, servedBy(envoys, b.id), target, 2*half, a.log.tail(4<<10))
		}
		time.Sleep(50 * time.Millisecond) // polling the proxies' own state
	}
	t.Logf("%v after the scale-up: %s serves %d, %s %d (target %d)", time.Since(scaled).Round(time.Millisecond), a.id, servedBy(envoys, a.id), b.id, servedBy(envoys, b.id), target)
	if n := servedBy(envoys, b.id); n > target {
		t.Errorf("%s serves %d proxies, over the target %d", b.id, n, target)
	}
	var moved []*envoy
	var movedBefore [][2]int
	var movedStreams []int
	for i, e := range envoys {
		e.ready("backend", "greeter")
		n := shedCount(e)
		if n > 0 && !e.delta {
			t.Errorf("%s, a state-of-the-world proxy, was shed %d times while delta ones were left on %s", e.node, n, a.id)
		}
		if e.identifier() == b.id {
			moved = append(moved, e)
			movedBefore, movedStreams = append(movedBefore, before[i]), append(movedStreams, streams[i])
		}
	}
	if len(moved) == 0 {
		t.Fatal("no proxy moved to the new replica")
	}
	checkNothingResent(t, moved, movedBefore, movedStreams, b.id)
}

// shedCount is how many of e's streams a replica shed (UNAVAILABLE, over
// its share), as opposed to refused at their start (RESOURCE_EXHAUSTED).
func shedCount(e *envoy) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.streams {
		if grpcstatus.Code(s.err) == codes.Unavailable && strings.Contains(grpcstatus.Convert(s.err).Message(), "over its share") {
			n++
		}
	}
	return n
}
