package replicas_test

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
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

// A draining replica is left out of the balance: while its proxies move
// to the others, those do not refuse them for being over a target shared
// with the replica that is leaving. Thirty scripted Envoys spread over
// three replicas by a round-robin balancer; C drains; every proxy ends on
// A or B, none refused for balance on a count of three replicas (the two
// may still even out between them).
func TestDrainingReplicaIsLeftOutOfTheBalance(t *testing.T) {
	const n = 30
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	drain := []string{"--drain-period", "3s"}
	a, b, c := f.start("replica-a", drain...), f.start("replica-b", drain...), f.start("replica-c", drain...)
	sameVersion(t, []*replica{a, b, c}, a.apply(greeterDoc(startBackend(t, "backend-1"))).Version)
	lb := startForwarder(t, a.xdsAddr, b.xdsAddr, c.xdsAddr)
	lb.balance()
	var envoys []*envoy
	for i := range n {
		envoys = append(envoys, startEnvoy(t, lb.Addr(), fmt.Sprintf("envoy-drain-balance-%d", i), i%2 == 0))
	}
	for _, e := range envoys {
		e.ready("backend", "greeter")
	}
	onC := servedBy(envoys, c.id)
	if onC == 0 {
		t.Fatalf("no proxy on %s before its drain", c.id)
	}
	refusedBefore := 0
	for _, e := range envoys {
		refusedBefore += refusedCount(e, "on 3 replicas")
	}

	c.signal(syscall.SIGTERM)
	waitUntil(t, c.id+"'s /readyz answering 503 draining", func() bool {
		code, word := c.readyz()
		return code == http.StatusServiceUnavailable && word == "draining"
	})
	lb.markDead(c.xdsAddr)
	waitShow(t, fmt.Sprintf("every proxy on %s or %s", a.id, b.id), func() bool {
		return servedBy(envoys, a.id)+servedBy(envoys, b.id) == n
	}, func() string {
		return fmt.Sprintf("%s %d, %s %d, %s %d", a.id, servedBy(envoys, a.id), b.id, servedBy(envoys, b.id), c.id, servedBy(envoys, c.id))
	})
	refused := -refusedBefore
	for _, e := range envoys {
		e.ready("backend", "greeter")
		refused += refusedCount(e, "on 3 replicas")
	}
	t.Logf("%d proxies moved off %s: %s serves %d, %s %d; %d refused on a count of 3 replicas", onC, c.id, a.id, servedBy(envoys, a.id), b.id, servedBy(envoys, b.id), refused)
	if refused > 0 {
		t.Errorf("%d streams refused for balance on a count of 3 replicas while %s drained: the draining replica was counted among those sharing its proxies", refused, c.id)
	}
}

// refusedCount is how many of e's streams a replica refused for balance
// (RESOURCE_EXHAUSTED, over its share) with a message saying why.
func refusedCount(e *envoy, why string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.streams {
		if msg := grpcstatus.Convert(s.err).Message(); grpcstatus.Code(s.err) == codes.ResourceExhausted && strings.Contains(msg, "over its share") && strings.Contains(msg, why) {
			n++
		}
	}
	return n
}
