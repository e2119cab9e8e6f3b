// Package rollout_test runs staged rollouts over real streams: the whole
// daemon in process, on loopback, with scripted xDS clients as the group's
// proxies (one node id each).
package rollout_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/rollout"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound bounds every wait.
const bound = 15 * time.Second

// configFor is the group "edge" with a two-stage policy (30%, then 60%,
// each baking bake) and one cluster whose connect timeout is the config's
// version: 1s is v1, 2s v2 and so on.
func configFor(version int, bake time.Duration) string {
	return fmt.Sprintf(`version: 1
groups:
- name: edge
  default: true
  rollout:
    stages: [{share: 30%%, bake: %s}, {share: 60%%, bake: %s}]
    halt: {on_nack: true}
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: web
  connect_timeout: %ds
  type: STATIC
- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  name: xdstest-probe
`, bake, bake, version)
}

// stages is the policy of configFor, to tell which nodes each stage takes.
var stages = &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.3}, {Share: 0.6}}}

// firstStage returns the stage a node joins (1 or 2; 3: only at the end).
func firstStage(id string) int {
	for s := 1; s <= 2; s++ {
		if stages.Takes(s, nodegroup.Node{ID: id}) {
			return s
		}
	}
	return 3
}

type pylon struct {
	t       *testing.T
	dir     string // data dir
	cfg     string // config file
	xds     string
	admin   string
	stop    func()
	conn    *grpc.ClientConn
	stopped bool
}

// start runs the daemon on cfg with dataDir until stop or the test's end.
func start(t *testing.T, cfg, dataDir string) *pylon {
	t.Helper()
	o := daemontest.FileMode(cfg)
	o.DataDir, o.Identifier = dataDir, "pylon-rollout"
	d := daemontest.Start(t, o)
	p := &pylon{t: t, dir: dataDir, cfg: cfg, xds: d.XDS, admin: d.Admin}
	p.stop = func() {
		if p.stopped {
			return
		}
		p.stopped = true
		if p.conn != nil {
			p.conn.Close()
		}
		d.Stop(t)
	}
	t.Cleanup(p.stop)
	p.conn = xdstest.Dial(t, p.xds)
	return p
}

func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// api calls the admin API with the write token.
func (p *pylon) api(method, path string) (int, []byte) {
	p.t.Helper()
	tok, err := os.ReadFile(filepath.Join(p.dir, "admin-token"))
	if err != nil {
		p.t.Fatal(err)
	}
	req, _ := http.NewRequest(method, "http://"+p.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

func (p *pylon) rollouts() []rollout.Status {
	p.t.Helper()
	code, b := p.api("GET", "/v1/rollouts")
	var body struct{ Rollouts []rollout.Status }
	if code != http.StatusOK || json.Unmarshal(b, &body) != nil {
		p.t.Fatalf("GET /v1/rollouts: %d %s", code, b)
	}
	return body.Rollouts
}

// proxy is one node's ADS stream, subscribed to Clusters.
type proxy struct {
	id    string
	s     *xdstest.Stream
	acked string // the version last ACKed
}

func (p *pylon) proxies(n int) []*proxy {
	p.t.Helper()
	out := make([]*proxy, n)
	for i := range out {
		id := fmt.Sprintf("edge-%d", i)
		out[i] = &proxy{id: id, s: xdstest.OpenADS(p.t, p.conn, xdstest.Node(id))}
		out[i].s.Request(xdstype.ClusterURL)
	}
	return out
}

// timeout is the connect timeout of the cluster a response carries: the
// config version it came from.
func timeout(t *testing.T, r *discoveryv3.DiscoveryResponse) int {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("%d clusters, want 1", len(r.Resources))
	}
	var c clusterv3.Cluster
	if err := r.Resources[0].UnmarshalTo(&c); err != nil {
		t.Fatal(err)
	}
	return int(c.ConnectTimeout.AsDuration() / time.Second)
}

// get reads the proxy's next response and checks it is of version want.
func (x *proxy) get(t *testing.T, want int) *discoveryv3.DiscoveryResponse {
	t.Helper()
	r := x.s.RecvType(xdstype.ClusterURL)
	if got := timeout(t, r); got != want {
		t.Fatalf("%s received v%d, want v%d", x.id, got, want)
	}
	return r
}

// recv reads the proxy's next response, checks it is of version want,
// and ACKs it.
func (x *proxy) recv(t *testing.T, want int) {
	t.Helper()
	r := x.get(t, want)
	x.s.ACK(r)
	x.acked = r.VersionInfo
}

// silent checks the proxy was sent nothing since its last response
// (xdstest.Stream.ExpectSilence: a probe answered in order, no sleep).
func (x *proxy) silent() { x.s.ExpectSilence() }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
