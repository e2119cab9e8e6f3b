package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const cds = xdstype.ClusterURL

const statusConfig = `groups:
- { name: edge, match: { id: "edge-*" } }
services:
- { name: web, connect_timeout: %s, endpoints: [{ address: 127.0.0.1, port: 8080 }] }
listeners:
- { name: https, address: 127.0.0.1, port: 8443, routes: web, tls: { secret: edge-cert } }
routes:
- { name: web, virtual_hosts: [{ name: web, domains: ["*"], routes: [{ to: [{ service: web }] }] }] }
secrets:
- { name: edge-cert, cert_file: tls.crt, key_file: tls.key }
`

const privateKey = "-----BEGIN PRIVATE KEY-----\nTOPSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n"

func statusPylon(t *testing.T) (*pylon, string) {
	t.Helper()
	dir := t.TempDir()
	writeAtomically(t, filepath.Join(dir, "tls.crt"), "-----BEGIN CERTIFICATE-----\nPUBLIC\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(dir, "tls.key"), privateKey)
	cfg := filepath.Join(dir, "pylon.yaml")
	writeAtomically(t, cfg, strings.Replace(statusConfig, "%s", "1s", 1))
	// The streams here are plaintext, and one reads a Secret to check the
	// dumps redact it: they opt in to Secrets without a client certificate.
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, InsecureServeSecrets: true})
	return p, cfg
}

// state waits until node's type reaches want in /proxies and returns it.
func (p *pylon) state(t *testing.T, node, typ, want string) *status.Type {
	t.Helper()
	var last string
	var found *status.Type
	if !eventually(func() bool {
		for _, s := range p.proxies(t) {
			if s.Node != node || s.Gone != nil {
				continue
			}
			for _, ty := range s.Types {
				if ty.Type == typ {
					last, found = ty.State, ty
					return ty.State == want
				}
			}
		}
		return false
	}) {
		t.Fatalf("%s %s is %q, want %q", node, typ, last, want)
	}
	return found
}

func (p *pylon) cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--admin-addr", p.adminAddr, "--read-token-file", filepath.Join(p.dataDir, "read-token"))
	if code := cli.Execute(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("pylon %v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

// Real streams in every state, read back through the admin API and through
// `pylon status`.
func TestProxyStates(t *testing.T) {
	p, _ := statusPylon(t)
	conn := xdstest.Dial(t, p.xdsAddr)

	synced := xdstest.OpenADS(t, conn, xdstest.Node("edge-synced"))
	synced.Request(cds)
	synced.ACK(synced.RecvType(cds))

	stale := xdstest.OpenADS(t, conn, xdstest.Node("edge-stale"))
	stale.Request(cds)
	stale.RecvType(cds) // and no ACK

	nacked := xdstest.OpenADS(t, conn, xdstest.Node("edge-nacked"))
	nacked.Request(cds)
	nacked.NACK(nacked.RecvType(cds), "", "cluster web: bad connect timeout")

	stray := xdstest.OpenADS(t, conn, xdstest.Node("stray"))
	stray.Request(cds)

	p.state(t, "edge-synced", "CDS", status.Synced)
	p.state(t, "edge-stale", "CDS", status.Stale)
	n := p.state(t, "edge-nacked", "CDS", status.Nacked)
	if n.LastNACK == nil || n.LastNACK.Detail != "cluster web: bad connect timeout" {
		t.Fatalf("NACK reason %+v", n.LastNACK)
	}
	p.state(t, "stray", "CDS", status.NotSent)

	table := p.cli(t, "status")
	for _, want := range []string{
		"NAME", "GROUP", "CDS", "LDS", "EDS", "RDS", "SDS", "VERSION",
		"edge-synced", "edge-stale", "edge-nacked", "stray", status.NoGroup,
		"edge-nacked CDS rejected version",
		"cluster web: bad connect timeout",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("pylon status lacks %q:\n%s", want, table)
		}
	}
	rowsPart, _, _ := strings.Cut(table, "\n\n") // the NACK reasons follow a blank line
	for _, line := range strings.Split(rowsPart, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		want := map[string]string{"edge-synced": "SYNCED", "edge-stale": "STALE", "edge-nacked": "NACKED"}[fields[0]]
		if want != "" && fields[2] != want {
			t.Errorf("row %q: CDS column %q, want %s", line, fields[2], want)
		}
	}
	detail := p.cli(t, "status", "edge-nacked")
	if !strings.Contains(detail, "last NACK of") || !strings.Contains(detail, "bad connect timeout") || !strings.Contains(detail, "should run") {
		t.Errorf("pylon status edge-nacked:\n%s", detail)
	}
}

// A proxy that NACKs version N and ACKs N+1 ends SYNCED, the NACK kept.
func TestNACKThenACKEndsSynced(t *testing.T) {
	p, cfg := statusPylon(t)
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("edge-flappy"))
	s.Request(cds)
	s.NACK(s.RecvType(cds), "", "rejected N")
	p.state(t, "edge-flappy", "CDS", status.Nacked)

	writeAtomically(t, cfg, strings.Replace(statusConfig, "%s", "2s", 1))
	var r *discoveryv3.DiscoveryResponse
	for r == nil || r.TypeUrl != cds {
		r = s.Recv()
	}
	s.ACK(r)
	ty := p.state(t, "edge-flappy", "CDS", status.Synced)
	if ty.LastNACK == nil || ty.LastNACK.Detail != "rejected N" {
		t.Fatalf("the NACK left the history: %+v", ty.LastNACK)
	}
}

// Dumps never carry private keys.
func TestDumpsRedactPrivateKeys(t *testing.T) {
	p, _ := statusPylon(t)
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("edge-tls"))
	s.Request(xdstype.SecretURL, "edge-cert")
	r := s.RecvType(xdstype.SecretURL)
	if !strings.Contains(string(r.Resources[0].Value), "TOPSECRETKEYMATERIAL") {
		t.Fatal("the proxy itself should get the key")
	}
	s.ACK(r, "edge-cert")
	p.state(t, "edge-tls", "SDS", status.Synced)
	b64 := base64.StdEncoding.EncodeToString([]byte(privateKey))
	for _, path := range []string{"/proxies/edge-tls", "/config", "/proxies"} {
		body := p.get(t, path)
		if strings.Contains(body, "TOPSECRETKEYMATERIAL") || strings.Contains(body, b64) || strings.Contains(body, b64[:40]) {
			t.Errorf("%s leaks the private key", path)
		}
		if path != "/proxies" && !strings.Contains(body, "[redacted]") {
			t.Errorf("%s shows no redacted secret:\n%.400s", path, body)
		}
	}
	for _, args := range [][]string{{"get", "secrets", "-o", "yaml"}, {"status", "edge-tls"}} {
		if out := p.cli(t, args...); strings.Contains(out, "TOPSECRETKEYMATERIAL") || strings.Contains(out, b64[:40]) {
			t.Errorf("pylon %v leaks the private key", args)
		}
	}
}

// scrape parses /metrics with Prometheus's own text parser.
func scrape(t *testing.T, p *pylon) map[string]*dto.MetricFamily { return scrapeTB(t, p) }

func scrapeTB(t testing.TB, p *pylon) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(p.get(t, "/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func counter(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The counters move as streams ACK and NACK.
func TestMetricsCountACKsAndNACKs(t *testing.T) {
	p, _ := statusPylon(t)
	before := scrape(t, p)
	conn := xdstest.Dial(t, p.xdsAddr)
	a := xdstest.OpenADS(t, conn, xdstest.Node("edge-a"))
	a.Request(cds)
	a.ACK(a.RecvType(cds))
	b := xdstest.OpenADS(t, conn, xdstest.Node("edge-b"))
	b.Request(cds)
	b.NACK(b.RecvType(cds), "", "no")
	p.state(t, "edge-a", "CDS", status.Synced)
	p.state(t, "edge-b", "CDS", status.Nacked)

	// A stream's status is its own, read when asked: it may show SYNCED
	// a moment before the ACK's event has reached the metrics.
	var after map[string]*dto.MetricFamily
	eventually(func() bool {
		after = scrape(t, p)
		_, ok := after["pylon_first_sync_seconds"]
		return ok && counter(after, "pylon_xds_acks_total", "type", "CDS")-counter(before, "pylon_xds_acks_total", "type", "CDS") >= 1
	})
	for _, c := range []struct {
		name string
		want float64
	}{
		{"pylon_xds_acks_total", 1},
		{"pylon_xds_nacks_total", 1},
		{"pylon_xds_responses_total", 2},
	} {
		if got := counter(after, c.name, "type", "CDS") - counter(before, c.name, "type", "CDS"); got != c.want {
			t.Errorf("%s{type=CDS} moved by %v, want %v", c.name, got, c.want)
		}
	}
	if counter(after, "pylon_xds_response_bytes_total", "type", "CDS") <= 0 {
		t.Error("no response bytes counted")
	}
	if counter(after, "pylon_config_publishes_total", "result", "published") < 1 {
		t.Error("the first publish was not counted")
	}
	streams := 0.0
	for _, m := range after["pylon_xds_streams"].GetMetric() {
		streams += m.GetGauge().GetValue()
	}
	if streams != 2 {
		t.Errorf("pylon_xds_streams sums to %v, want 2", streams)
	}
	// Both streams only synced for the first time: that is the first-sync
	// histogram's, not push latency's, which times changes only.
	if _, ok := after["pylon_first_sync_seconds"]; !ok {
		t.Error("no first-sync histogram")
	}
	for _, m := range after["pylon_push_latency_seconds"].GetMetric() {
		if n := m.GetHistogram().GetSampleCount(); n != 0 {
			t.Errorf("first syncs recorded as push latency: %d samples", n)
		}
	}
}
