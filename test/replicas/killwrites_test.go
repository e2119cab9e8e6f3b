package replicas_test

import (
	"fmt"
	"testing"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// Issue 14 "Must show": a replica killed with SIGKILL in the middle of a
// sequence of API writes loses none it acknowledged: every write that got
// a 200 is in the other replica's store at the revision it was
// acknowledged with, in its history with the version it answered, and in
// the config it serves; the write in flight at the kill may or may not be
// there; writes go on through the survivor at later revisions.
func TestSIGKILLDuringWrites(t *testing.T) {
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	// Every write is kept in the history the test reads back.
	a := f.start("replica-a", "--history-limit", "1000")
	b := f.start("replica-b", "--history-limit", "1000")
	proxy := startEnvoy(t, b.xdsAddr, "envoy-of-b", true)
	proxy.ready()

	w := startWriter(t, a, "w")
	w.waitAcked(t, 15)
	a.kill()
	// The write in flight at the kill, or the next, gets no answer.
	waitUntil(t, "a write through the killed replica unanswered", func() bool { return w.unanswered() > 0 })
	w.stop()
	w.checkWrong(t)
	acked := w.results()
	t.Logf("writer through %s: %s", a.id, w.summary())

	checkAcked(t, b, acked)
	last := acked[len(acked)-1]
	objs, _ := b.storedObjects()
	next := fmt.Sprintf("w-%d", len(acked))
	_, landed := objs["services/"+next]
	t.Logf("the first unacknowledged write (%s) is in the store: %v (either is right)", next, landed)

	// B serves every acknowledged write to its proxy.
	proxy.waitFor("every acknowledged write", func(e *envoy) bool {
		for _, a := range acked {
			if !holdsCluster(a.name)(e) {
				return false
			}
		}
		return true
	})
	// And writes go on through B, after the acknowledged ones.
	if res := b.apply(serviceDoc("after-kill", 1)); res.Revision <= last.revision {
		t.Fatalf("a write through %s after the kill got revision %d, not after the acknowledged %d", b.id, res.Revision, last.revision)
	}
}
