// Package rest runs the whole daemon with REST-JSON xDS polling (rule X44)
// on loopback, over mutual TLS, and polls it as Envoy's REST subscription
// does.
package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound limits every wait.
const bound = 10 * time.Second

// restSource is the config source of resources fetched over REST, as
// docs/rest.md shows it.
const restSource = `{ resource_api_version: V3, api_config_source: { api_type: REST, transport_api_version: V3, cluster_names: [pylon_rest], refresh_delay: 1s } }`

// config is a file-mode config of raw resources that a REST Envoy can use:
// EDS from a REST config source; the edge group sees edge-web only.
func config(clusters ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\ngroups:\n- name: edge\n  match: { id: \"edge-*\" }\n  scope: { clusters: [edge-web] }\n- name: everyone\n  default: true\nresources:\n")
	for _, c := range clusters {
		b.WriteString(`- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: ` + c + `
  type: EDS
  connect_timeout: 1s
  eds_cluster_config:
    eds_config: ` + restSource + `
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: ` + c + `
  endpoints:
  - lb_endpoints:
    - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 8080 } } }
`)
	}
	return b.String()
}

// pylon is the daemon under test.
type pylon struct {
	dir, config, rest string
	ca                *certstest.CA
}

// start runs the daemon in file mode with xDS and REST over mutual TLS and
// node ids bound to certificates, until the test ends.
func start(t *testing.T, o daemon.Options, clusters ...string) *pylon {
	t.Helper()
	p := &pylon{dir: t.TempDir(), ca: certstest.NewCA(t, "rest-ca")}
	server := p.ca.Issue(t, certstest.Server("pylon-1")).Write(t, p.ca, p.dir, "server")
	p.config = filepath.Join(p.dir, "pylon.yaml")
	if err := os.WriteFile(p.config, []byte(config(clusters...)), 0o644); err != nil {
		t.Fatal(err)
	}
	o.ConfigPath, o.DataDir = p.config, t.TempDir()
	o.XDSAddr, o.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.DebounceQuiet, o.DebounceMax = 20*time.Millisecond, 200*time.Millisecond
	o.XDSTLS = daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA}
	o.NodeIdentity, o.TrustDomain = "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "example.org"
	o.REST.Addr = "127.0.0.1:0"
	listening := make(chan string, 1)
	o.REST.OnListen = func(addr string) { listening <- addr }
	ready := make(chan struct{}, 1)
	o.OnReady = func(string, string) { ready <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- daemon.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	for range 2 {
		select {
		case p.rest = <-listening:
		case <-ready:
		case err := <-errc:
			t.Fatalf("daemon did not start: %v", err)
		case <-time.After(bound):
			t.Fatal("daemon did not start")
		}
	}
	return p
}

// client is an HTTPS client presenting a certificate for node id in
// cluster ("" id: none), speaking HTTP/1.1 (as an Envoy cluster does by
// default) or h2.
func (p *pylon) client(t *testing.T, id, cluster string, h2 bool) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: certstest.Pool(p.ca), ServerName: "localhost", MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if id != "" {
		f := p.ca.Issue(t, certstest.Client("spiffe://example.org/ns/"+cluster+"/sa/"+id)).Write(t, p.ca, p.dir, id)
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if h2 {
		cfg.NextProtos = []string{"h2"}
		tr := &http2.Transport{TLSClientConfig: cfg}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// poller polls one type as Envoy's REST subscription does: POST the JSON
// of the DiscoveryRequest with the version it last accepted.
type poller struct {
	url string
	c   *http.Client
	req *discoveryv3.DiscoveryRequest
}

func (p *pylon) poller(c *http.Client, path, id, cluster string, names ...string) *poller {
	return &poller{url: "https://" + p.rest + path, c: c, req: &discoveryv3.DiscoveryRequest{
		Node: &corev3.Node{Id: id, Cluster: cluster}, ResourceNames: names,
	}}
}

// poll returns the status, the body and, on 200, the resource names, and
// keeps the version as Envoy does.
func (pl *poller) poll(t *testing.T) (int, string, []string) {
	t.Helper()
	body, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(pl.req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pl.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pl.c.Do(req)
	if err != nil {
		t.Fatalf("poll %s: %v", pl.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), nil
	}
	dr := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(b, dr); err != nil {
		t.Fatalf("200 with a body that is not a DiscoveryResponse: %v\n%s", err, b)
	}
	pl.req.VersionInfo = dr.GetVersionInfo()
	var names []string
	for _, a := range dr.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, xdstype.NameOf(m))
	}
	slices.Sort(names)
	return resp.StatusCode, string(b), names
}

// The daemon serves REST over its xDS TLS to HTTP/1.1 and h2 clients, with
// groups and identity binding as on gRPC, and a long poll returns the
// change the file brings.
func TestX44_DaemonOverMutualTLS(t *testing.T) {
	p := start(t, daemon.Options{REST: daemon.RESTOptions{Wait: 5 * time.Second}}, "backend", "edge-web")
	for _, h2 := range []bool{false, true} {
		c := p.client(t, "edge-1", "edge", h2)
		code, body, names := p.poller(c, "/v3/discovery:clusters", "edge-1", "edge").poll(t)
		if code != http.StatusOK || !slices.Equal(names, []string{"edge-web"}) {
			t.Fatalf("h2=%v: edge-1 got %d %v %s", h2, code, names, body)
		}
	}
	// Another group's node, another certificate: everything.
	other := p.poller(p.client(t, "app-1", "apps", false), "/v3/discovery:clusters", "app-1", "apps")
	if code, body, names := other.poll(t); code != http.StatusOK || !slices.Equal(names, []string{"backend", "edge-web"}) {
		t.Fatalf("app-1 got %d %v %s", code, names, body)
	}
	// A certificate that does not prove the node: 403.
	liar := p.poller(p.client(t, "app-2", "apps", false), "/v3/discovery:clusters", "edge-1", "edge")
	if code, body, _ := liar.poll(t); code != http.StatusForbidden || !strings.Contains(body, "must present a certificate for spiffe://example.org/ns/edge/sa/edge-1") {
		t.Fatalf("a certificate for app-2 claiming edge-1: %d %s", code, body)
	}
	// A long poll at the current version returns the change the config
	// file brings.
	done := make(chan []string, 1)
	go func() {
		code, body, names := other.poll(t)
		if code != http.StatusOK {
			t.Errorf("long poll: %d %s", code, body)
		}
		done <- names
	}()
	if err := os.WriteFile(p.config, []byte(config("backend", "edge-web", "api")), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case names := <-done:
		if !slices.Equal(names, []string{"api", "backend", "edge-web"}) {
			t.Fatalf("after the change: %v", names)
		}
	case <-time.After(bound):
		t.Fatal("the long poll did not return the change")
	}
}

// A long poll beyond the bound is refused at start, naming the flag.
func TestX44_DaemonRefusesTooLongWait(t *testing.T) {
	o := daemon.Options{
		DataDir: t.TempDir(),
		XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		REST: daemon.RESTOptions{Addr: "127.0.0.1:0", Wait: time.Hour},
	}
	dir := t.TempDir()
	o.ConfigPath = filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(o.ConfigPath, []byte(config("backend", "edge-web")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	err := daemon.Run(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "--xds-rest-wait is 1h0m0s; it must be between 0 and 5m0s") {
		t.Fatalf("Run: %v", err)
	}
}
