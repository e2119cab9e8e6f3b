package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// shardDoc is two node groups, each scoped to its own listener and what
// it names; group b's service is written with port.
func shardDoc(port int) string {
	doc := map[string]any{
		"groups": []any{
			map[string]any{"name": "a", "match": map[string]any{"id": "a-*"}, "scope": map[string]any{"listeners": []string{"la"}}},
			map[string]any{"name": "b", "match": map[string]any{"id": "b-*"}, "scope": map[string]any{"listeners": []string{"lb"}}},
		},
		"services": []any{
			map[string]any{"name": "a1", "endpoints": []any{map[string]any{"address": "10.0.0.1", "port": 80}}},
			map[string]any{"name": "b1", "endpoints": []any{map[string]any{"address": "10.0.1.1", "port": port}}},
		},
		"routes": []any{
			map[string]any{"name": "ra", "virtual_hosts": []any{map[string]any{"name": "a", "domains": []string{"*"}, "routes": []any{map[string]any{"to": []any{map[string]any{"service": "a1"}}}}}}},
			map[string]any{"name": "rb", "virtual_hosts": []any{map[string]any{"name": "b", "domains": []string{"*"}, "routes": []any{map[string]any{"to": []any{map[string]any{"service": "b1"}}}}}}},
		},
		"listeners": []any{
			map[string]any{"name": "la", "port": 8080, "routes": "ra"},
			map[string]any{"name": "lb", "port": 8081, "routes": "rb"},
		},
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// applyShard posts doc to /v1/apply and returns the status and body.
func applyShard(t *testing.T, d *daemontest.Daemon, doc string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+d.Admin+"/v1/apply", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token(t, "admin-token"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

// A shard compiles only its groups' share of the config, but a write
// through its admin API is checked whole: a mistake in a group it does
// not serve is refused there as on any replica, not stored for the
// shards serving that group to refuse.
func TestShardChecksEveryGroupOfAWrite(t *testing.T) {
	d := daemontest.Start(t, daemon.Options{Replicas: daemon.ReplicaOptions{Groups: fleet.Selector{"a"}}})
	if code, body := applyShard(t, d, shardDoc(80)); code != http.StatusOK {
		t.Fatalf("a good config: %d %s", code, body)
	}
	code, body := applyShard(t, d, shardDoc(0))
	if code == http.StatusOK || !strings.Contains(body, `b1`) || !strings.Contains(body, `endpoints[0].port`) {
		t.Errorf("a config whose group b (served elsewhere) has a bad port: %d %s\nwant it refused naming b1's endpoints[0].port", code, body)
	}
}

// shardFileDoc is shardDoc's two groups as a file, group a staging each
// change to its canaries first, a1 balancing by lb; group b's listener
// serves the Secret b-cert, which only b's identities may have, from
// keyDir: the host of the shard serving a holds no such key.
func shardFileDoc(lb, keyDir string) string {
	return `groups:
- name: a
  match: { id: "a-*" }
  scope: { listeners: [la] }
  rollout:
    stages:
    - { selector: { metadata: { canary: "true" } }, bake: 1h }
- name: b
  match: { id: "b-*" }
  identities: ["spiffe://example.org/b/*"]
  scope: { listeners: [lb] }
services:
- { name: a1, lb: ` + lb + `, endpoints: [{ address: 10.0.0.1, port: 80 }] }
- { name: b1, endpoints: [{ address: 10.0.1.1, port: 80 }] }
routes:
- name: ra
  virtual_hosts: [{ name: a, domains: ["*"], routes: [{ to: [{ service: a1 }] }] }]
- name: rb
  virtual_hosts: [{ name: b, domains: ["*"], routes: [{ to: [{ service: b1 }] }] }]
listeners:
- { name: la, port: 8080, routes: ra }
- { name: lb, port: 8443, routes: rb, tls: { secret: b-cert } }
secrets:
- name: b-cert
  cert_file: ` + filepath.Join(keyDir, "b.crt") + `
  key_file: ` + filepath.Join(keyDir, "b.key") + `
  identities: ["spiffe://example.org/b/*"]
`
}

// writeFile replaces path's content at once, as a deploy tool does.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// clustersOf is the names and balancing policies of a response's
// Clusters.
func clustersOf(t *testing.T, resources []*anypb.Any) []string {
	t.Helper()
	var out []string
	for _, a := range resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c.GetName()+" "+c.GetLbPolicy().String())
	}
	return out
}

// A shard where features meet: serving group a alone (--groups a), it
// serves a's nodes over SotW and delta a's share only, never building
// group b's Secret (its key file is not on this host, and the config is
// served all the same); a change of a's service goes through a's staged
// rollout, to the canary first. (A node of b claims no identity here, so
// it is in no group; test/replicas shows b's nodes refused naming their
// shard.)
func TestShardServesItsGroupsShareOverSotWAndDeltaWithARollout(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	keys := filepath.Join(dir, "b-keys") // not there: b's shard hosts hold b's keys
	writeFile(t, cfg, shardFileDoc("round_robin", keys))
	o := daemontest.FileMode(cfg)
	o.Replicas.Groups = fleet.Selector{"a"}
	o.SecretDirs = []string{dir}
	d := daemontest.Start(t, o)
	conn := xdstest.Dial(t, d.XDS)

	canaryNode := xdstest.Node("a-canary")
	canaryNode.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"canary": structpb.NewStringValue("true")}}
	canary := xdstest.OpenADS(t, conn, canaryNode)
	canary.Request(xdstype.ClusterURL)
	clusters := canary.RecvType(xdstype.ClusterURL)
	if got := clustersOf(t, clusters.GetResources()); !slices.Equal(got, []string{"a1 ROUND_ROBIN"}) {
		t.Fatalf("node a-canary (SotW) got the clusters %v, want a1 alone", got)
	}
	canary.ACK(clusters)

	other := xdstest.OpenDeltaADS(t, conn, xdstest.Node("a-2"))
	other.Subscribe(xdstype.ListenerURL, "*")
	listeners := other.RecvType(xdstype.ListenerURL)
	if rs := listeners.GetResources(); len(rs) != 1 || rs[0].GetName() != "la" {
		t.Fatalf("node a-2 (delta) got the listeners %v, want la alone", rs)
	}
	other.ACK(listeners)
	other.Subscribe(xdstype.ClusterURL, "a1")
	got := other.RecvType(xdstype.ClusterURL)
	other.ACK(got)

	// The change reaches the canary, the rollout's stage; a-2 keeps the
	// previous version: its next response is the one it asks for now.
	writeFile(t, cfg, shardFileDoc("least_request", keys))
	next := canary.RecvType(xdstype.ClusterURL)
	if got := clustersOf(t, next.GetResources()); !slices.Equal(got, []string{"a1 LEAST_REQUEST"}) {
		t.Fatalf("the canary got the clusters %v after the change, want a1 balancing by least request", got)
	}
	canary.ACK(next)
	other.Subscribe(xdstype.RouteURL, "ra")
	if rs := other.RecvType(xdstype.RouteURL).GetResources(); len(rs) != 1 || rs[0].GetName() != "ra" {
		t.Fatalf("node a-2 got the route configurations %v, want ra", rs)
	}
}

// deltaCluster is a1 as a new delta stream of node id gets it.
func deltaCluster(t *testing.T, addr, id string) []string {
	t.Helper()
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, addr), xdstest.Node(id))
	s.Subscribe(xdstype.ClusterURL, "a1")
	resp := s.RecvType(xdstype.ClusterURL)
	var out []*anypb.Any
	for _, r := range resp.GetResources() {
		out = append(out, r.GetResource())
	}
	return clustersOf(t, out)
}

// A shard restarted during its group's rollout resumes it: the previous
// version it compiles again is its groups' share, as the config it
// serves is, so a Secret of another group whose key is not on this host
// does not stop it, and the nodes outside the stage keep the previous
// version.
func TestShardResumesItsGroupsRolloutAfterARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	keys := filepath.Join(dir, "b-keys") // not there: b's shard hosts hold b's keys
	writeFile(t, cfg, shardFileDoc("round_robin", keys))
	o := daemontest.FileMode(cfg)
	o.Replicas.Groups = fleet.Selector{"a"}
	o.SecretDirs = []string{dir}
	o.DataDir = filepath.Join(dir, "data")
	d := daemontest.Start(t, o)
	if got := deltaCluster(t, d.XDS, "a-2"); !slices.Equal(got, []string{"a1 ROUND_ROBIN"}) {
		t.Fatalf("before the change a-2 got %v", got)
	}
	canaryNode := xdstest.Node("a-canary")
	canaryNode.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"canary": structpb.NewStringValue("true")}}
	canary := xdstest.OpenADS(t, xdstest.Dial(t, d.XDS), canaryNode)
	canary.Request(xdstype.ClusterURL)
	canary.ACK(canary.RecvType(xdstype.ClusterURL))
	writeFile(t, cfg, shardFileDoc("least_request", keys))
	if got := clustersOf(t, canary.RecvType(xdstype.ClusterURL).GetResources()); !slices.Equal(got, []string{"a1 LEAST_REQUEST"}) {
		t.Fatalf("the canary got %v after the change", got)
	}
	d.Stop(t)

	d = daemontest.Start(t, o)
	if got := deltaCluster(t, d.XDS, "a-2"); !slices.Equal(got, []string{"a1 ROUND_ROBIN"}) {
		t.Errorf("after the restart a-2, outside the rollout's stage, got %v: the rollout was not resumed", got)
	}
}
