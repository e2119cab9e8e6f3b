package relay_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/store/etcd/etcdtest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// shardConfig is two node groups, one per shard, taken by cluster: the
// relay's default key ({cluster}) names them.
const shardConfig = `groups:
- name: edge-eu
  match: { cluster: edge-eu }
- name: mesh
  match: { cluster: mesh }
`

// shards are two replicas on one etcd, replica-a serving edge-* and
// replica-b mesh, over mutual TLS, so that a refusal names the address of
// the shard serving a group to a client whose certificate is verified;
// and the files of a relay's client certificate.
type shards struct {
	a, b     *daemontest.Daemon
	tlsFiles daemon.RelayOptions
}

func startShards(t *testing.T) shards {
	t.Helper()
	dir := t.TempDir()
	ca := certstest.NewCA(t, "shard-test-ca")
	server := ca.Issue(t, certstest.Server("pylon-1")).Write(t, ca, dir, "server")
	client := ca.Issue(t, certstest.Client("spiffe://example.org/relay/site-1")).Write(t, ca, dir, "relay")
	srv := etcdtest.Start(t)
	start := func(id, groups string) *daemontest.Daemon {
		sel, err := fleet.ParseSelector(groups)
		if err != nil {
			t.Fatal(err)
		}
		return daemontest.Start(t, daemon.Options{
			Store: daemon.StoreEtcd, Identifier: id,
			Etcd: daemon.EtcdOptions{
				Endpoints: []string{srv.Endpoint()}, Prefix: "/relay-shards",
				Timeout: 300 * time.Millisecond, StartTimeout: 10 * time.Second,
			},
			FleetStatusPeriod: 100 * time.Millisecond,
			Replicas:          daemon.ReplicaOptions{Groups: sel},
			XDSTLS:            daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA},
			DebounceQuiet:     daemontest.Quiet, DebounceMax: daemontest.MaxWait,
		})
	}
	s := shards{a: start("replica-a", "edge-*"), b: start("replica-b", "mesh")}
	req, err := http.NewRequest(http.MethodPost, "http://"+s.a.Admin+"/v1/apply", bytes.NewBufferString(shardConfig+greeter(9001)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.a.Token(t, "admin-token"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %s", resp.Status)
	}
	// Each shard builds its own groups from the written revision: wait
	// until both have it, lest the relay meet one still on the first.
	for _, d := range []*daemontest.Daemon{s.a, s.b} {
		read := d.Token(t, "read-token")
		if !eventually(func() bool {
			var st struct {
				Config struct{ Groups []struct{ Name string } } `json:"config"`
			}
			getJSON(t, d.Admin, "/status", read, &st)
			return len(st.Config.Groups) == 2 && st.Config.Groups[0].Name == "edge-eu"
		}) {
			t.Fatalf("replica at %s does not serve the applied groups", d.Admin)
		}
	}
	s.tlsFiles = daemon.RelayOptions{UpstreamCA: server.CA, UpstreamCert: client.Cert, UpstreamKey: client.Key}
	return s
}

// keyOf is the relay's key named.
func keyOf(r *relay.Relay, name string) (relay.KeyStatus, bool) {
	for _, k := range r.Keys() {
		if k.Key == name {
			return k, true
		}
	}
	return relay.KeyStatus{}, false
}

// TestKeysReachTheShardServingTheirGroup: with --upstream-for per group
// selector, each key's upstream stream goes to the shard serving its
// group, and each key's proxy gets its config through the relay.
func TestKeysReachTheShardServingTheirGroup(t *testing.T) {
	s := startShards(t)
	ro := s.tlsFiles
	ro.UpstreamFor = []string{"edge-*=" + s.a.XDS, "mesh=" + s.b.XDS}
	rd := startRelay(t, []string{s.b.XDS}, "", ro)
	for _, c := range []struct{ cluster, shard string }{{"edge-eu", s.a.XDS}, {"mesh", s.b.XDS}} {
		if _, p := subscribeEndpointsOf(t, rd.xds, "proxy-"+c.cluster, c.cluster); p != 9001 {
			t.Fatalf("%s's proxy got endpoints on port %d, want 9001", c.cluster, p)
		}
		if k, _ := keyOf(rd.r, c.cluster); k.Upstream != c.shard || !k.Connected || k.Refused != "" {
			t.Errorf("key %s: %+v, want connected to %s, not refused", c.cluster, k, c.shard)
		}
	}
}

// TestMisroutedKeyIsRetriedOnTheShardItsRefusalNames: a key sent to a
// shard that does not serve its group is refused there (its
// FAILED_PRECONDITION names the shard that does); the relay says so in
// the key's status and, the address named being one of its upstreams,
// retries there. Named an address it does not know, it stays refused.
func TestMisroutedKeyIsRetriedOnTheShardItsRefusalNames(t *testing.T) {
	s := startShards(t)
	ro := s.tlsFiles
	ro.UpstreamFor = []string{"edge-*=" + s.b.XDS}
	rd := startRelay(t, []string{s.a.XDS}, "", ro)
	if _, p := subscribeEndpointsOf(t, rd.xds, "proxy-edge", "edge-eu"); p != 9001 {
		t.Fatalf("the misrouted key's proxy got endpoints on port %d, want 9001", p)
	}
	k, _ := keyOf(rd.r, "edge-eu")
	if k.Upstream != s.a.XDS || !k.Connected {
		t.Errorf("key edge-eu: %+v, want connected to replica-a at %s after the refusal", k, s.a.XDS)
	}
	if !strings.Contains(k.Refused, s.b.XDS+` refused the key: node "relay-test/edge-eu" is in group "edge-eu", which this replica does not serve`) ||
		!strings.Contains(k.Refused, "replica replica-a serves it (--groups edge-*) at "+s.a.XDS) {
		t.Errorf("key edge-eu's refusal %q does not name the refusing upstream and the shard serving the group", k.Refused)
	}
	var st struct {
		Config struct{ Warnings []struct{ Message string } } `json:"config"`
	}
	getJSON(t, rd.admin, "/status", readToken(t, rd), &st)
	if len(st.Config.Warnings) == 0 || !strings.HasPrefix(st.Config.Warnings[0].Message, "key edge-eu misrouted (--upstream-for): upstream "+s.b.XDS+" refused the key") {
		t.Errorf("the relay's /status warnings %+v do not say key edge-eu is misrouted", st.Config.Warnings)
	}

	ro.UpstreamFor = nil
	lost := startRelay(t, []string{s.b.XDS}, "", ro)
	subscribeOnly(t, lost.xds, "proxy-edge-2", "edge-eu")
	if !eventually(func() bool {
		k, ok := keyOf(lost.r, "edge-eu")
		return ok && strings.Contains(k.Refused, "at "+s.a.XDS) && strings.Contains(k.Refused, "not one of this relay's upstreams")
	}) {
		k, _ := keyOf(lost.r, "edge-eu")
		t.Fatalf("key edge-eu sent to replica-b alone: %+v, want its refusal, naming an address the relay does not know", k)
	}
	if k, _ := keyOf(lost.r, "edge-eu"); k.Connected || k.Upstream != s.b.XDS {
		t.Errorf("key edge-eu: %+v, want not connected, tried on %s alone", k, s.b.XDS)
	}
}

// subscribeOnly opens a delta ADS stream of a node of cluster on the
// relay, subscribed to the greeter's endpoints.
func subscribeOnly(t *testing.T, relayAddr, id, cluster string) *xdstest.DeltaStream {
	t.Helper()
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, relayAddr), &corev3.Node{Id: id, Cluster: cluster})
	s.Subscribe(xdstype.EndpointURL, "greeter-backends")
	return s
}

// subscribeEndpointsOf is subscribeEndpoints for a node of cluster.
func subscribeEndpointsOf(t *testing.T, relayAddr, id, cluster string) (*xdstest.DeltaStream, uint32) {
	t.Helper()
	s := subscribeOnly(t, relayAddr, id, cluster)
	resp := s.RecvType(xdstype.EndpointURL)
	s.ACK(resp)
	return s, port(t, resp)
}

// readToken is the relay's read token, in its data folder.
func readToken(t *testing.T, rd *relayd) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rd.dataDir, "read-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
