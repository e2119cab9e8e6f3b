package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/relay"
	"github.com/pylon-xds/pylon/internal/status"
)

// bound caps every wait in these tests.
const bound = 20 * time.Second

// eventually polls cond every 10ms until it holds, within bound.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// relayd is a relay running in process.
type relayd struct {
	xds, admin, dataDir string
	r                   *relay.Relay
	stop                func()
}

// startRelay runs `pylon relay` in process on loopback ports in front of
// upstreams, keeping its data in dataDir ("": a fresh folder), until stop
// or the end of the test.
func startRelay(t *testing.T, upstreams []string, dataDir string, ro daemon.RelayOptions) *relayd {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	ro.Upstreams = upstreams
	if ro.ID == "" {
		ro.ID = "relay-test"
	}
	if ro.MaxBackoff == 0 {
		ro.MinBackoff, ro.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	}
	rd := &relayd{dataDir: dataDir}
	got := make(chan *relay.Relay, 1)
	ro.Relay = func(r *relay.Relay) { got <- r }
	ready := make(chan [2]string, 1)
	o := daemon.Options{
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DataDir: dataDir, Identifier: "relay-e2e",
		OnReady: func(x, a string) { ready <- [2]string{x, a} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- daemon.RunRelay(ctx, o, ro) }()
	stopped := false
	rd.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("relay: %v", err)
		}
	}
	t.Cleanup(rd.stop)
	select {
	case a := <-ready:
		rd.xds, rd.admin = a[0], a[1]
	case err := <-errc:
		stopped = true
		t.Fatalf("relay did not start: %v", err)
	case <-time.After(bound):
		t.Fatal("relay did not start in time")
	}
	rd.r = <-got
	return rd
}

// upstream is a Pylon daemon serving a config file.
type upstream struct {
	d    *daemontest.Daemon
	cfg  string
	read string
}

// startUpstream runs Pylon in file mode on addr ("": any loopback port)
// with config.
func startUpstream(t *testing.T, addr, config string) *upstream {
	t.Helper()
	return startUpstreamWith(t, addr, config, func(*daemon.Options) {})
}

// startUpstreamWith is startUpstream with options of the test's.
func startUpstreamWith(t *testing.T, addr, config string, set func(*daemon.Options)) *upstream {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, config)
	o := daemontest.FileMode(cfg)
	o.XDSAddr, o.Identifier = addr, "upstream"
	set(&o)
	d := daemontest.Start(t, o)
	return &upstream{d: d, cfg: cfg, read: d.Token(t, "read-token")}
}

// restartOn starts a Pylon on the same address and config as u (stopped).
func (u *upstream) restartOn(t *testing.T, config string) *upstream {
	t.Helper()
	return startUpstream(t, u.d.XDS, config)
}

func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// proxies is GET /proxies of an admin API.
func proxies(t *testing.T, admin, token string) []status.Stream {
	t.Helper()
	var body struct {
		Streams []status.Stream `json:"streams"`
	}
	getJSON(t, admin, "/proxies", token, &body)
	return body.Streams
}

func getJSON(t *testing.T, admin, path, token string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", path, resp.StatusCode, err, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// open are the streams of list still open.
func open(list []status.Stream) []status.Stream {
	var out []status.Stream
	for _, s := range list {
		if s.Gone == nil {
			out = append(out, s)
		}
	}
	return out
}

// greeter is a config for proxyless gRPC clients dialing xds:///greeter:
// an API listener, its routes, an EDS cluster over the ports.
func greeter(ports ...int) string {
	var eps strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&eps, "    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %d } } }\n", p)
	}
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: greeter
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: greeter
      rds: { route_config_name: greeter, config_source: { ads: {}, resource_api_version: V3 } }
      http_filters:
      - name: router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: greeter
  virtual_hosts:
  - name: greeter
    domains: [greeter]
    routes:
    - match: { prefix: "" }
      route: { cluster: greeter-backends }
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: greeter-backends
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: V3 } }
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: greeter-backends
  endpoints:
  - locality: { region: test }
    load_balancing_weight: 1
    lb_endpoints:
%s`, eps.String())
}

// metricsText is GET /metrics of an admin API (open: no token).
func metricsText(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
