package replicas_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
)

// With etcd unreachable, a replica knows its own proxies and not the
// others': /status and /proxies say the fleet list is partial, `pylon
// status` heads its table with PARTIAL, its own proxies keep their state
// and another replica's are no longer shown SYNCED but as last read, with
// how long ago. Once etcd is back, the list is whole again.
func TestEtcdDownStatusIsPartial(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	f := newFleet(t, []string{srv.Endpoint()})
	a, b := f.start("replica-a"), f.start("replica-b")
	all := []*replica{a, b}
	sameVersion(t, all, a.apply(serviceDoc("api", 1)).Version)
	ea, eb := startEnvoy(t, a.xdsAddr, "node-of-a", false), startEnvoy(t, b.xdsAddr, "node-of-b", false)
	ea.ready("api")
	eb.ready("api")
	waitRows(a, "", syncedText("node-of-a", a.id)+"\n"+syncedText("node-of-b", b.id), "node-of-a", "node-of-b")

	srv.Stop()
	waitUntil(t, "replica-a's /proxies partial with etcd stopped", func() bool {
		_, partial := a.proxies()
		return partial != ""
	})
	if st := a.status(); !strings.Contains(st.Partial, "etcd unreachable") {
		t.Errorf("/status on %s with etcd stopped: partial %q, want it to say etcd is unreachable", a.id, st.Partial)
	}
	out, code := a.cli("status")
	if code != 0 || !strings.Contains(out, "PARTIAL: ") {
		t.Errorf("pylon status with etcd stopped: exit %d, want a PARTIAL line:\n%s", code, out)
	}
	own, other := rowOf(out, "node-of-a"), rowOf(out, "node-of-b")
	if strings.Count(own, "SYNCED") != len(xdsTypes()) {
		t.Errorf("pylon status with etcd stopped: this replica's proxy row %q, want it SYNCED in every type:\n%s", own, out)
	}
	if strings.Contains(other, "SYNCED") || !regexp.MustCompile(`replica-b \(as of \d+s ago\)`).MatchString(other) {
		t.Errorf("pylon status with etcd stopped: the other replica's proxy row %q, want it not SYNCED but as of some seconds ago:\n%s", other, out)
	}

	srv.Restart()
	waitUntil(t, "replica-a's /proxies whole once etcd is back", func() bool {
		_, partial := a.proxies()
		return partial == ""
	})
	waitRows(a, "", syncedText("node-of-a", a.id)+"\n"+syncedText("node-of-b", b.id), "node-of-a", "node-of-b")
}

// rowOf is the line of a `pylon status` table that starts with node.
func rowOf(out, node string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, node+" ") {
			return l
		}
	}
	return ""
}
