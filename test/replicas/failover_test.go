package replicas_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// Issue 14 item 5 and "Must show": proxies connected to replica A through
// a load balancer; A dies with SIGKILL; each proxy reconnects to B, ends
// SYNCED there with every type, and is resent nothing it holds: delta by
// initial_resource_versions (X35), SotW by the version_info it presents
// per type (X24). A's proxies leave the fleet-wide /proxies once A's
// lease expires, and show under B on every replica. grpc-go's RPCs keep
// working throughout.
func TestFailoverSIGKILL(t *testing.T) {
	srv := etcdtest.Start(t)
	t.Run("sotw", func(t *testing.T) { failover(t, srv, false) })
	t.Run("delta", func(t *testing.T) { failover(t, srv, true) })
}

func failover(t *testing.T, srv *etcdtest.Server, delta bool) {
	f := newFleet(t, []string{srv.Endpoint()})
	a, b, c := f.start("replica-a"), f.start("replica-b"), f.start("replica-c")
	all := []*replica{a, b, c}
	fwd := startForwarder(t, a.xdsAddr, b.xdsAddr, c.xdsAddr)
	one, two := startBackend(t, "backend-1"), startBackend(t, "backend-2")
	sameVersion(t, all, a.apply(greeterDoc(one)).Version)

	kind := map[bool]string{false: "sotw", true: "delta"}[delta]
	var envoys []*envoy
	var nodes []string
	for i := range 3 {
		e := startEnvoy(t, fwd.Addr(), fmt.Sprintf("envoy-%s-%d", kind, i), delta)
		envoys = append(envoys, e)
		nodes = append(nodes, e.node)
	}
	for _, e := range envoys {
		e.ready("backend", "greeter")
	}
	g := newGreeter(t, fwd.Addr(), "grpc-"+kind)
	g.reaches("backend-1")
	withGRPC := append([]string{g.node}, nodes...)
	waitRows(a, "", allSynced(a.id, withGRPC...), withGRPC...)
	waitRows(c, "", allSynced(a.id, withGRPC...), withGRPC...)
	before := make([][2]int, len(envoys))
	streams := make([]int, len(envoys))
	for i, e := range envoys {
		before[i][0], before[i][1] = e.received()
		streams[i] = e.streamCount()
	}

	calls := g.callsDuring()
	a.kill()
	fwd.markDead(a.xdsAddr)
	killed := time.Now()

	// Every proxy on B, SYNCED with every type, as B itself sees them.
	// An ACK comes after what it acknowledges was counted: whatever B
	// sent before SYNCED is in the counts checked next.
	waitRows(b, b.id, allSynced(b.id, nodes...), nodes...)
	t.Logf("%s: %d scripted Envoys SYNCED on %s %v after %s's SIGKILL", kind, len(nodes), b.id, time.Since(killed).Round(time.Millisecond), a.id)
	waitRows(b, b.id, allSynced(b.id, withGRPC...), withGRPC...)
	t.Logf("%s: grpc-go SYNCED on B %v after (it reconnects with its own backoff: 65ms to 2.8s seen)", kind, time.Since(killed).Round(time.Millisecond))
	checkNothingResent(t, envoys, before, streams, b.id)
	if n := fwd.routedTo(b.xdsAddr); n < len(withGRPC) {
		t.Errorf("the balancer sent %d connections to %s, want one per proxy (%d) at least", n, b.id, len(withGRPC))
	}

	if ok, failed := calls(); len(failed) > 0 || ok == 0 {
		t.Errorf("grpc-go's RPCs during the failover: %d served, %d failed: %v", ok, len(failed), failed)
	}

	// A's summary leaves the fleet-wide list when its lease expires:
	// every replica then shows the proxies under B only.
	for _, r := range []*replica{b, c} {
		waitRows(r, "", allSynced(b.id, withGRPC...), withGRPC...)
	}
	t.Logf("%s: A's proxies left the fleet-wide /proxies %v after the SIGKILL (lease %v)", kind, time.Since(killed).Round(time.Millisecond), fleetTTL)

	// The new streams are live: a write through C reaches every proxy
	// through B, and grpc-go's RPCs move to backend-2.
	c.apply(greeterDoc(two) + serviceDoc("after-failover", 1))
	g.reaches("backend-2")
	for _, e := range envoys {
		e.waitFor("the write after the failover", holdsCluster("after-failover"))
		if id := e.identifier(); id != b.id {
			t.Errorf("%s's last response came from %q, want %s", e.node, id, b.id)
		}
	}
}

// checkNothingResent requires every proxy to be on a new stream and to
// have received nothing since before (resources and bytes) and streams
// (streams opened) were taken, but the greeting: a state-of-the-world
// stream whose resends are all spared still gets one response of one
// unchanged resource, since Envoy and grpc-go reset their reconnect
// backoff only on a received message (docs/protocol.md, X24).
func checkNothingResent(t *testing.T, envoys []*envoy, before [][2]int, streams []int, to string) {
	t.Helper()
	var resent, resentBytes int
	for i, e := range envoys {
		if e.streamCount() <= streams[i] {
			t.Fatalf("%s is SYNCED on %s without a new stream:\n%v", e.node, to, e)
		}
		n, bytes := e.received()
		n, bytes = n-before[i][0], bytes-before[i][1]
		resent += n
		resentBytes += bytes
		if n > 1 {
			t.Errorf("%s was resent %d resources (%d bytes) on its new stream to %s, want at most the greeting's one: it presented what it holds\n%v", e.node, n, bytes, to, e)
		}
	}
	t.Logf("%d resources, %d bytes resent to %d Envoys on their new streams", resent, resentBytes, len(envoys))
}
