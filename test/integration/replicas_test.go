package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// replica is one Pylon replica on the etcd store, run in process.
type replica struct {
	*pylon
	id  string
	log *daemontest.LogBuffer
}

// startReplica runs a daemon named id on the etcd member under prefix,
// with its own data folder (its tokens) and short etcd bounds, until the
// test ends.
func startReplica(t *testing.T, srv *etcdtest.Server, prefix, id string) *replica {
	t.Helper()
	logs := &daemontest.LogBuffer{}
	d := daemontest.Start(t, daemon.Options{
		Store: daemon.StoreEtcd, Identifier: id,
		Etcd: daemon.EtcdOptions{
			Endpoints: []string{srv.Endpoint()}, Prefix: prefix,
			Timeout: 500 * time.Millisecond, Probe: 100 * time.Millisecond, StartTimeout: bound,
		},
		DebounceQuiet: daemontest.Quiet, DebounceMax: daemontest.MaxWait,
		Logger: logs.Logger(),
	})
	p := &pylon{xdsAddr: d.XDS, adminAddr: d.Admin, dataDir: d.DataDir,
		token: d.Token(t, "admin-token"), readToken: d.Token(t, "read-token")}
	return &replica{pylon: p, id: id, log: logs}
}

// clusterWatch is a raw ADS client of one replica subscribed to every
// Cluster, ACKing what it receives.
type clusterWatch struct {
	s    *xdstest.Stream
	last *discoveryv3.DiscoveryResponse
}

func watchClusters(t *testing.T, r *replica, node string) *clusterWatch {
	t.Helper()
	s := xdstest.OpenADS(t, xdstest.Dial(t, r.xdsAddr), xdstest.Node(node))
	s.Request(xdstype.ClusterURL)
	return &clusterWatch{s: s}
}

// until receives Cluster responses until one holds a cluster named name
// (or, with gone, none), and returns it. Every response must name the
// replica it came from.
func (w *clusterWatch) until(t *testing.T, id, name string, gone bool) *discoveryv3.DiscoveryResponse {
	t.Helper()
	if w.last != nil && slices.Contains(clusterNames(t, w.last), name) != gone {
		return w.last
	}
	for range 50 {
		resp := w.s.RecvType(xdstype.ClusterURL)
		w.s.ACK(resp)
		w.last = resp
		if got := resp.GetControlPlane().GetIdentifier(); got != id {
			t.Fatalf("a response from %s says control_plane.identifier %q", id, got)
		}
		if slices.Contains(clusterNames(t, resp), name) != gone {
			return resp
		}
	}
	t.Fatalf("the client of %s never had cluster %s (gone: %v)", id, name, gone)
	return nil
}

func clusterNames(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var names []string
	for _, a := range resp.Resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		names = append(names, c.GetName())
	}
	return names
}

// readyz is a replica's open readiness probe: its code and body.
func (r *replica) readyz(t *testing.T) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + r.adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// replicaStatus is the part of /status this test reads.
type replicaStatus struct {
	Identifier string `json:"identifier"`
	Degraded   bool   `json:"degraded"`
	Reason     string `json:"reason"`
	Config     struct {
		Version string `json:"version"`
	} `json:"config"`
}

func (r *replica) fullStatus(t *testing.T) replicaStatus {
	t.Helper()
	var st replicaStatus
	if err := json.Unmarshal([]byte(r.get(t, "/status")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReplicasOnEtcd runs three replicas on one etcd prefix: a write
// through one reaches the proxies of another; all publish byte-identical
// resources under identical versions; with etcd stopped, writes are
// refused with 503, every replica says degraded and why, and proxies keep
// their config; with etcd back, everything catches up without a restart.
func TestReplicasOnEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	const prefix = "/replicas-test"
	a := startReplica(t, srv, prefix, "replica-a")
	b := startReplica(t, srv, prefix, "replica-b")
	c := startReplica(t, srv, prefix, "replica-c")
	all := []*replica{a, b, c}
	if log := a.log.String(); !strings.Contains(log, "serving the config kept in etcd") || !strings.Contains(log, "etcd_prefix="+prefix) {
		t.Fatalf("replica A's log does not say it serves from etcd under %s:\n%s", prefix, log)
	}

	// A write through A reaches a client of C, exactly.
	watchC := watchClusters(t, c, "proxy-of-c")
	watchC.until(t, c.id, "backend", false) // the seeded quickstart
	code, res := a.api(t, "POST", "/v1/apply", "services:\n- { name: fleet-api, endpoints: [{ address: 10.0.0.7, port: 8080 }] }\n")
	if code != http.StatusOK {
		t.Fatalf("apply through A: %d %v", code, res)
	}
	written := fmt.Sprint(res["version"])
	got := watchC.until(t, c.id, "fleet-api", false)
	waitAll(t, all, "the write published", func(r *replica) bool { return r.fullStatus(t).Config.Version == written })

	// The same store revision: byte-identical resources under identical
	// versions on every replica, on the wire.
	for _, r := range []*replica{a, b} {
		w := watchClusters(t, r, "proxy-of-"+r.id)
		other := w.until(t, r.id, "fleet-api", false)
		if other.VersionInfo != got.VersionInfo || len(other.Resources) != len(got.Resources) {
			t.Fatalf("%s serves Clusters version %q (%d resources), %s %q (%d)", r.id, other.VersionInfo, len(other.Resources), c.id, got.VersionInfo, len(got.Resources))
		}
		for i := range got.Resources {
			if !bytes.Equal(other.Resources[i].GetValue(), got.Resources[i].GetValue()) {
				t.Fatalf("%s and %s serve different bytes for %v", r.id, c.id, clusterNames(t, got)[i])
			}
		}
	}
	for _, r := range all {
		if st := r.fullStatus(t); st.Identifier != r.id || st.Degraded {
			t.Fatalf("%s /status: %+v", r.id, st)
		}
	}

	// etcd stopped: writes refused with 503 and why, every replica
	// degraded (ready still: it serves the last good config), the client
	// of C keeps its config.
	srv.Stop()
	code, res = a.api(t, "POST", "/v1/apply", "services:\n- { name: during-outage, endpoints: [{ address: 10.0.0.8, port: 8080 }] }\n")
	if code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(res["error"]), "etcd unreachable at "+srv.Endpoint()) {
		t.Fatalf("a write with etcd stopped: %d %v, want 503 saying etcd is unreachable", code, res)
	}
	waitAll(t, all, "degraded", func(r *replica) bool {
		code, body := r.readyz(t)
		st := r.fullStatus(t)
		return code == http.StatusOK && body["status"] == "degraded" && st.Degraded &&
			strings.HasPrefix(st.Reason, "store unreachable since ") && strings.Contains(st.Reason, srv.Endpoint())
	})
	for _, r := range all {
		if v := r.fullStatus(t).Config.Version; v != written {
			t.Fatalf("%s serves %q during the outage, not the last good %q", r.id, v, written)
		}
	}

	// etcd back: degraded clears, and a write through B reaches the same
	// stream of C's client, which stayed up throughout.
	srv.Restart()
	waitAll(t, all, "no longer degraded", func(r *replica) bool {
		code, body := r.readyz(t)
		return code == http.StatusOK && body["status"] == "ready" && !r.fullStatus(t).Degraded
	})
	code, res = b.api(t, "POST", "/v1/apply", "services:\n- { name: after-outage, endpoints: [{ address: 10.0.0.9, port: 8080 }] }\n")
	if code != http.StatusOK {
		t.Fatalf("apply through B after etcd returned: %d %v", code, res)
	}
	after := watchC.until(t, c.id, "after-outage", false)
	if names := clusterNames(t, after); slices.Contains(names, "during-outage") || !slices.Contains(names, "fleet-api") {
		t.Fatalf("C's client after the outage holds %v", names)
	}
	waitAll(t, all, "the write after the outage published", func(r *replica) bool { return r.fullStatus(t).Config.Version == fmt.Sprint(res["version"]) })
}

// waitAll polls cond on every replica every 50ms until it holds on all,
// within bound.
func waitAll(t *testing.T, rs []*replica, what string, cond func(*replica) bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for attempt := 0; ; attempt++ {
		pending := ""
		for _, r := range rs {
			if !cond(r) {
				pending = r.id
				break
			}
		}
		if pending == "" {
			return
		}
		if time.Now().After(deadline) || attempt > 10000 {
			t.Fatalf("%s: %s not there within %v", what, pending, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
