// Package rest runs the whole daemon with REST-JSON xDS polling (rule X44)
// on loopback, over mutual TLS, and polls it as Envoy's REST subscription
// does.
package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
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
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
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
	data, admin       string
	ca                *certstest.CA
	log               *daemontest.LogBuffer
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
	p.data, p.log = t.TempDir(), &daemontest.LogBuffer{}
	o.ConfigPath, o.DataDir = p.config, p.data
	o.Logger = p.log.Logger()
	o.DebounceQuiet, o.DebounceMax = daemontest.Quiet, daemontest.MaxWait
	o.XDSTLS = daemon.TLSFiles{Cert: server.Cert, Key: server.Key, ClientCA: server.CA}
	o.NodeIdentity, o.TrustDomain = "spiffe://{trust_domain}/ns/{cluster}/sa/{id}", "example.org"
	o.REST.Addr = "127.0.0.1:0"
	listening := make(chan string, 1)
	o.REST.OnListen = func(addr string) { listening <- addr }
	p.admin = daemontest.Start(t, o).Admin
	// The REST listener is bound before the first config is served.
	p.rest = <-listening
	return p
}

// client is an HTTPS client presenting a certificate for node id in
// cluster ("" id: none), speaking HTTP/1.1 (as an Envoy cluster does by
// default) or h2.
// h2Only fails the test when an answer comes over anything but HTTP/2.
type h2Only struct {
	t    *testing.T
	next http.RoundTripper
}

func (h h2Only) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err == nil && resp.ProtoMajor != 2 {
		h.t.Errorf("an h2 client was answered over %s", resp.Proto)
	}
	return resp, err
}

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
		tr := &http.Transport{TLSClientConfig: cfg, Protocols: new(http.Protocols)}
		tr.Protocols.SetHTTP2(true) // HTTP/2 only
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: h2Only{t, tr}}
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
	code, body, names, err := pl.try()
	if err != nil {
		t.Fatal(err)
	}
	return code, body, names
}

// try is poll for any goroutine: errors are returned, not fatal.
func (pl *poller) try() (int, string, []string, error) {
	body, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(pl.req)
	if err != nil {
		return 0, "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pl.url, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pl.c.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("poll %s: %w", pl.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), nil, nil
	}
	dr := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(b, dr); err != nil {
		return 0, "", nil, fmt.Errorf("200 with a body that is not a DiscoveryResponse: %v\n%s", err, b)
	}
	pl.req.VersionInfo = dr.GetVersionInfo()
	var names []string
	for _, a := range dr.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			return 0, "", nil, err
		}
		names = append(names, xdstype.NameOf(m))
	}
	slices.Sort(names)
	return resp.StatusCode, string(b), names, nil
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
		code, body, names, err := other.try()
		if err != nil || code != http.StatusOK {
			t.Errorf("long poll: %d %s %v", code, body, err)
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
	o := daemon.Options{REST: daemon.RESTOptions{Addr: "127.0.0.1:0", Wait: time.Hour}}
	dir := t.TempDir()
	o.ConfigPath = filepath.Join(dir, "pylon.yaml")
	if err := os.WriteFile(o.ConfigPath, []byte(config("backend", "edge-web")), 0o644); err != nil {
		t.Fatal(err)
	}
	err := daemontest.Refusal(t, o)
	if err == nil || !strings.Contains(err.Error(), "--xds-rest-wait is 1h0m0s; it must be between 0 and 5m0s") {
		t.Fatalf("Run: %v", err)
	}
}

// Every REST poll is a stream of the core, and an Envoy polls each type
// every second or so: a poll's start and end are not logged at info level,
// and an answered poll is not kept among the proxies' closed streams, where
// it would push real disconnects out.
func TestX44_PollsDoNotFloodLogOrStatus(t *testing.T) {
	p := start(t, daemon.Options{}, "backend", "edge-web")
	pl := p.poller(p.client(t, "app-1", "apps", false), "/v3/discovery:clusters", "app-1", "apps")
	for range 20 {
		if code, body, _ := pl.poll(t); code != http.StatusOK && code != http.StatusNotModified {
			t.Fatalf("poll: %d %s", code, body)
		}
	}
	if n := strings.Count(p.log.String(), "proxy connected") + strings.Count(p.log.String(), "proxy disconnected"); n != 0 {
		t.Fatalf("20 polls logged %d connect/disconnect lines at info level:\n%s", n, p.log)
	}
	tok, err := os.ReadFile(filepath.Join(p.data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+p.admin+"/proxies", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), "app-1") {
		t.Fatalf("GET /proxies after the polls: %d %s", resp.StatusCode, b)
	}
}
