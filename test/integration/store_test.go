package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// storePylon runs the daemon in its default mode, on the embedded store in
// dataDir, until stop is called or the test ends.
func storePylon(t testing.TB, dataDir string) (p *pylon, stop func()) {
	t.Helper()
	p, stop = runPylon(t, daemon.Options{DataDir: dataDir})
	p.token = readToken(t, dataDir)
	return p, stop
}

func readToken(t testing.TB, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// api calls the admin API with the write token; it returns the status and
// the decoded JSON body.
func (p *pylon) api(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, "http://"+p.adminAddr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func objectRevision(t testing.TB, p *pylon, kind, name string) int64 {
	t.Helper()
	code, o := p.api(t, "GET", "/v1/objects/"+kind+"/"+name, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s/%s: %d %v", kind, name, code, o)
	}
	return int64(o["revision"].(float64))
}

func TestStoreWrites(t *testing.T) {
	p, _ := storePylon(t, t.TempDir())

	// Seeded with the quickstart: the fleet serves it.
	if code, objs := p.api(t, "GET", "/v1/objects", nil); code != http.StatusOK || len(objs["objects"].([]any)) != 8 {
		t.Fatalf("seeded objects: %d %v", code, objs)
	}

	// Writes need the token.
	anon := *p
	anon.token = ""
	if code, _ := anon.api(t, "PUT", "/v1/objects/services/api", map[string]any{"name": "api", "endpoints": []any{}}); code != http.StatusUnauthorized {
		t.Fatalf("a write without the token: %d", code)
	}

	// Create, then two writers at the same revision: the second is stale.
	svc := map[string]any{"name": "api", "endpoints": []any{map[string]any{"address": "10.0.0.1", "port": 80}}}
	if code, res := p.api(t, "POST", "/v1/objects/services/api", svc); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, res)
	}
	if code, _ := p.api(t, "POST", "/v1/objects/services/api", svc); code != http.StatusConflict {
		t.Fatalf("creating it again: %d, want 409", code)
	}
	rev := objectRevision(t, p, "services", "api")
	svc["connect_timeout"] = "2s"
	code, first := p.api(t, "PUT", fmt.Sprintf("/v1/objects/services/api?revision=%d", rev), svc)
	if code != http.StatusOK {
		t.Fatalf("first writer: %d %v", code, first)
	}
	svc["connect_timeout"] = "3s"
	if code, res := p.api(t, "PUT", fmt.Sprintf("/v1/objects/services/api?revision=%d", rev), svc); code != http.StatusConflict {
		t.Fatalf("second writer at a stale revision: %d %v, want 409", code, res)
	}

	// An invalid write: 400 with the file-mode diagnostics, nothing stored,
	// the fleet untouched.
	if !eventually(func() bool { return p.status(t).Version == first["version"] }) {
		t.Fatal("the valid write was not published")
	}
	version := p.status(t).Version
	_, before := p.api(t, "GET", "/v1/objects", nil)
	bad := map[string]any{"name": "broken", "virtual_hosts": []any{map[string]any{"name": "v", "domains": []any{"*"}, "routes": []any{map[string]any{"to": []any{map[string]any{"service": "apii"}}}}}}}
	code, res := p.api(t, "PUT", "/v1/objects/routes/broken", bad)

	if code != http.StatusBadRequest {
		t.Fatalf("invalid write: %d %v, want 400", code, res)
	}
	js, _ := json.Marshal(res["diagnostics"])
	for _, want := range []string{`routes/broken`, `virtual_hosts[0].routes[0].to[0].service`, `did you mean \"api\"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("diagnostics %s lack %s", js, want)
		}
	}
	_, after := p.api(t, "GET", "/v1/objects", nil)
	if len(after["objects"].([]any)) != len(before["objects"].([]any)) || after["revision"] != before["revision"] {
		t.Fatal("an invalid write changed the store")
	}
	if p.status(t).Version != version {
		t.Fatal("an invalid write changed the fleet")
	}

	// A dry run validates and reports, storing nothing.
	code, res = p.api(t, "POST", "/v1/apply?dryRun=true", "services:\n- { name: extra, endpoints: [{ address: 10.0.0.9, port: 80 }] }\n")
	if code != http.StatusOK || res["dryRun"] != true {
		t.Fatalf("dry run: %d %v", code, res)
	}
	if changes, _ := json.Marshal(res["changes"]); !strings.Contains(string(changes), "+Cluster/extra") {
		t.Fatalf("dry run changes %s", changes)
	}
	if code, _ := p.api(t, "GET", "/v1/objects/services/extra", nil); code != http.StatusNotFound {
		t.Fatal("a dry run stored something")
	}
}

// edsWatch subscribes a SotW client to one assignment and returns a
// function waiting until it holds want endpoints.
func edsWatch(t *testing.T, p *pylon, cluster string) func(want int) {
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("eds-watcher"))
	s.Request(xdstype.EndpointURL, cluster)
	return func(want int) {
		t.Helper()
		for range 50 {
			r := s.RecvType(xdstype.EndpointURL)
			s.Request(xdstype.EndpointURL, cluster)
			if countEndpoints(t, r) == want {
				return
			}
		}
		t.Fatalf("%s never had %d endpoints", cluster, want)
	}
}

func countEndpoints(t *testing.T, r *discoveryv3.DiscoveryResponse) int {
	n := 0
	for _, a := range r.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		js, _ := protojson.Marshal(m)
		n += strings.Count(string(js), `"portValue"`)
	}
	return n
}

// A leased endpoint leaves EDS on its own when not renewed.
func TestEndpointLeaseExpires(t *testing.T) {
	p, _ := storePylon(t, t.TempDir())
	wait := edsWatch(t, p, "backend") // the quickstart's service has one endpoint
	wait(1)
	// "backend" is a raw Cluster in the quickstart, not a model service:
	// refused, saying so.
	if code, res := p.api(t, "POST", "/v1/services/backend/endpoints", map[string]any{"address": "127.0.0.2", "port": 8080, "ttl": "1s"}); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(res["error"]), "raw Cluster") {
		t.Fatalf("registering into a raw cluster: %d %v, want 400 naming the raw Cluster", code, res)
	}
	if code, res := p.api(t, "POST", "/v1/apply", "services:\n- { name: leased, endpoints: [{ address: 127.0.0.1, port: 9000 }] }\n"); code != http.StatusOK {
		t.Fatalf("apply: %d %v", code, res)
	}
	wait2 := edsWatch(t, p, "leased")
	wait2(1)
	if code, res := p.api(t, "POST", "/v1/services/leased/endpoints", map[string]any{"address": "127.0.0.3", "port": 9000, "ttl": "1s"}); code != http.StatusOK {
		t.Fatalf("register: %d %v", code, res)
	}
	wait2(2)
	// Not renewed: it leaves within a second or two.
	wait2(1)
}

const storeWorld = `services:
- { name: svc, endpoints: [{ address: 127.0.0.1, port: %d }] }
routes:
- { name: r, virtual_hosts: [{ name: v, domains: ["*"], routes: [{ to: [{ service: svc }] }] }] }
listeners:
- { name: l, address: 127.0.0.1, port: 10080, routes: r }
`

// Restart on the same data folder: config and history intact, and a delta
// client that reconnects with what it holds receives nothing new.
func TestRestartKeepsConfigAndFleetQuiet(t *testing.T) {
	dir := t.TempDir()
	p, stop := storePylon(t, dir)
	code, res := p.api(t, "POST", "/v1/apply", fmt.Sprintf(storeWorld, 1000))
	if code != http.StatusOK {
		t.Fatalf("apply: %d %v", code, res)
	}
	if !eventually(func() bool { return p.status(t).Version == res["version"] }) {
		t.Fatal("the applied config was not published")
	}
	subs := []struct {
		url   string
		names []string
	}{{xdstype.ClusterURL, nil}, {xdstype.EndpointURL, []string{"svc"}}, {xdstype.ListenerURL, nil}, {xdstype.RouteURL, []string{"r"}}}
	held := map[string]map[string]string{}
	s := xdstest.OpenDeltaADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("restart-1"))
	for _, sub := range subs {
		s.Subscribe(sub.url, sub.names...)
		r := s.RecvType(sub.url)
		held[sub.url] = map[string]string{}
		for _, res := range r.Resources {
			held[sub.url][res.Name] = res.Version
		}
		s.ACK(r)
	}
	if _, ok := held[xdstype.ClusterURL]["svc"]; !ok {
		t.Fatal("the applied config was not served")
	}
	_, hist := p.api(t, "GET", "/v1/history", nil)
	s.Close()
	stop()

	p2, _ := storePylon(t, dir)
	_, hist2 := p2.api(t, "GET", "/v1/history", nil)
	if len(hist2["history"].([]any)) != len(hist["history"].([]any)) {
		t.Fatalf("history %d entries after restart, was %d", len(hist2["history"].([]any)), len(hist["history"].([]any)))
	}
	s2 := xdstest.OpenDeltaADS(t, xdstest.Dial(t, p2.xdsAddr), xdstest.Node("restart-1"))
	for _, sub := range subs {
		s2.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: sub.url, ResourceNamesSubscribe: sub.names, InitialResourceVersions: held[sub.url]})
		if r := s2.RecvType(sub.url); len(r.Resources) != 0 || len(r.RemovedResources) != 0 {
			t.Errorf("%s after restart: %d resources, removed %v; want nothing", sub.url, len(r.Resources), r.RemovedResources)
		}
	}
}

// Roll back over the wire with the CLI: the fleet follows.
func TestRollbackOverTheWire(t *testing.T) {
	dir := t.TempDir()
	p, _ := storePylon(t, dir)
	apply := func(port int) int64 {
		code, res := p.api(t, "POST", "/v1/apply", fmt.Sprintf(storeWorld, port))
		if code != http.StatusOK {
			t.Fatalf("apply: %d %v", code, res)
		}
		return int64(res["revision"].(float64))
	}
	first := apply(1000)
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("rollback-1"))
	s.Request(xdstype.EndpointURL, "svc")
	waitPort := func(port int) {
		t.Helper()
		for range 50 {
			r := s.RecvType(xdstype.EndpointURL)
			s.Request(xdstype.EndpointURL, "svc")
			for _, a := range r.Resources {
				m, err := a.UnmarshalNew()
				if err != nil {
					t.Fatal(err)
				}
				js, _ := protojson.Marshal(m)
				if strings.Contains(string(js), fmt.Sprintf(`"portValue":%d`, port)) {
					return
				}
			}
		}
		t.Fatalf("never saw port %d", port)
	}
	waitPort(1000)
	apply(2000)
	waitPort(2000)

	out := p.cli(t, "rollback", fmt.Sprint(first), "--token-file", filepath.Join(dir, "admin-token"))
	if !strings.Contains(out, "stored as revision") {
		t.Fatalf("pylon rollback: %s", out)
	}
	waitPort(1000)
	hist := p.cli(t, "history")
	if !strings.Contains(hist, fmt.Sprintf("rollback to revision %d", first)) {
		t.Fatalf("pylon history:\n%s", hist)
	}
	// A unified diff of YAML: the rollback put the first port back.
	diff := p.cli(t, "diff", fmt.Sprint(first+1))
	if !strings.Contains(diff, "# services/svc") || !strings.Contains(diff, "\n-  port: 2000\n+  port: 1000\n") {
		t.Fatalf("pylon diff:\n%s", diff)
	}
}

// In file mode the config API is read-only, and says why.
func TestFileModeAPIIsReadOnly(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pylon.yaml")
	writeAtomically(t, cfg, "resources: []\n")
	p := startPylon(t, cfg)
	p.token = readToken(t, p.dataDir)
	code, res := p.api(t, "PUT", "/v1/objects/services/web", map[string]any{"name": "web"})
	if code != http.StatusMethodNotAllowed || !strings.Contains(fmt.Sprint(res["error"]), "read-only") {
		t.Fatalf("a write in file mode: %d %v", code, res)
	}
}

// `pylon get objects` lists what the store holds.
func TestGetObjects(t *testing.T) {
	p, _ := storePylon(t, t.TempDir())
	out := p.cli(t, "get", "objects")
	for _, want := range []string{"KIND", "resources.Cluster", "backend", "resources.Listener"} {
		if !strings.Contains(out, want) {
			t.Errorf("pylon get objects lacks %q:\n%s", want, out)
		}
	}
}
