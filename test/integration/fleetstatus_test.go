package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// startFleetReplica is startReplica with fleet status published every
// 100ms on a 2s lease, and a stop that ends the replica mid-test.
func startFleetReplica(t *testing.T, srv *etcdtest.Server, prefix, id string) (*replica, func()) {
	t.Helper()
	logs := &daemontest.LogBuffer{}
	d := daemontest.Start(t, daemon.Options{
		Store: daemon.StoreEtcd, Identifier: id,
		Etcd: daemon.EtcdOptions{
			Endpoints: []string{srv.Endpoint()}, Prefix: prefix,
			Timeout: 500 * time.Millisecond, Probe: 100 * time.Millisecond, StartTimeout: bound,
		},
		FleetStatusPeriod: 100 * time.Millisecond, FleetStatusTTL: 2 * time.Second,
		DebounceQuiet: daemontest.Quiet, DebounceMax: daemontest.MaxWait,
		ShutdownGrace: time.Second,
		Logger:        logs.Logger(),
	})
	p := &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, dataDir: d.DataDir,
		token: d.Token(t, "admin-token"), readToken: d.Token(t, "read-token")}
	return &replica{pylon: p, id: id, log: logs}, func() { d.Stop(t) }
}

// fleetProxies is /proxies of r as "node@replica:CDS state", sorted, and
// its partial note.
func fleetProxies(t *testing.T, r *replica) (string, string) {
	t.Helper()
	var body struct {
		Streams []struct {
			Replica string `json:"replica"`
			Node    string `json:"node"`
			Gone    any    `json:"disconnectedAt"`
			Types   []struct {
				Type  string `json:"type"`
				State string `json:"state"`
			} `json:"types"`
		} `json:"streams"`
		Partial string `json:"partial"`
	}
	if err := json.Unmarshal([]byte(r.get(t, "/proxies")), &body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range body.Streams {
		if s.Gone != nil {
			continue // this replica's recently closed streams
		}
		state := "-"
		for _, ty := range s.Types {
			if ty.Type == "CDS" {
				state = ty.State
			}
		}
		out = append(out, fmt.Sprintf("%s@%s:%s", s.Node, s.Replica, state))
	}
	sort.Strings(out)
	return strings.Join(out, " "), body.Partial
}

// syncedClient opens a raw ADS client of r as node and ACKs its Clusters.
func syncedClient(t *testing.T, r *replica, node string) *xdstest.Stream {
	t.Helper()
	s := xdstest.OpenADS(t, xdstest.Dial(t, r.xdsAddr), xdstest.Node(node))
	s.Request(xdstype.ClusterURL)
	s.ACK(s.RecvType(xdstype.ClusterURL))
	return s
}

// Issue 14 item 4: /proxies and `pylon status` on any replica show the
// whole fleet with the replica serving each proxy; a stopped replica's
// proxies leave the list, and reappear under the replica they reconnect to.
func TestFleetStatusAcrossReplicas(t *testing.T) {
	srv := etcdtest.Start(t)
	a, _ := startFleetReplica(t, srv, "/fleet", "pylon-a")
	b, stopB := startFleetReplica(t, srv, "/fleet", "pylon-b")
	c, _ := startFleetReplica(t, srv, "/fleet", "pylon-c")
	syncedClient(t, a, "edge-a")
	clientB := syncedClient(t, b, "edge-b")
	syncedClient(t, c, "edge-c")

	const all = "edge-a@pylon-a:SYNCED edge-b@pylon-b:SYNCED edge-c@pylon-c:SYNCED"
	for _, r := range []*replica{a, b, c} {
		var got, partial string
		if !eventually(func() bool { got, partial = fleetProxies(t, r); return got == all && partial == "" }) {
			t.Fatalf("/proxies on %s: %q (partial %q), want %q", r.id, got, partial, all)
		}
	}
	out := a.cli(t, "status")
	for _, want := range []string{
		`(?m)^NAME\s+GROUP\s+CDS.*\sREPLICA\s+VERSION$`,
		`(?m)^edge-a\s.*\spylon-a\s+\S+$`, `(?m)^edge-b\s.*\spylon-b\s+\S+$`, `(?m)^edge-c\s.*\spylon-c\s+\S+$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("pylon status on pylon-a lacks %s:\n%s", want, out)
		}
	}

	// B stops: its proxy leaves the other replicas' lists (at once: a
	// clean stop withdraws its summary; a crash waits for the lease,
	// tested in internal/fleetstatus).
	clientB.Close()
	stopB()
	const withoutB = "edge-a@pylon-a:SYNCED edge-c@pylon-c:SYNCED"
	var got string
	if !eventually(func() bool { got, _ = fleetProxies(t, a); return got == withoutB }) {
		t.Fatalf("/proxies on pylon-a after pylon-b stopped: %q, want %q", got, withoutB)
	}
	// edge-b reconnects to C: every replica lists it there.
	syncedClient(t, c, "edge-b")
	const moved = "edge-a@pylon-a:SYNCED edge-b@pylon-c:SYNCED edge-c@pylon-c:SYNCED"
	for _, r := range []*replica{a, c} {
		if !eventually(func() bool { got, _ = fleetProxies(t, r); return got == moved }) {
			t.Fatalf("/proxies on %s after edge-b moved: %q, want %q", r.id, got, moved)
		}
	}

	// etcd away: A still lists its own proxy, live, and says the rest is
	// partial, in /proxies and in pylon status.
	srv.Stop()
	var partial string
	if !eventually(func() bool {
		got, partial = fleetProxies(t, a)
		return strings.HasPrefix(partial, "fleet status partial: etcd unreachable")
	}) {
		t.Fatalf("/proxies on pylon-a with etcd stopped: %q, partial %q", got, partial)
	}
	if !strings.Contains(got, "edge-a@pylon-a:SYNCED") {
		t.Errorf("/proxies on pylon-a with etcd stopped lost its own proxy: %q", got)
	}
	if out := a.cli(t, "status"); !strings.Contains(out, "PARTIAL: fleet status partial: etcd unreachable") {
		t.Errorf("pylon status with etcd stopped does not say the list is partial:\n%s", out)
	}
}
