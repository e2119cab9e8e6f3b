package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pylon-xds/pylon/internal/cli"
	"github.com/pylon-xds/pylon/internal/daemon"
	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// redactionMarker is in every planted key; nothing Pylon shows may hold
// it, in clear or base64 (a []byte body, an inlineBytes), at any depth.
const redactionMarker = "REDACTIONMARKERxq7"

// markedKey is a private key block whose body holds the marker and where.
func markedKey(where string) string {
	return "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B" + redactionMarker + where + "\nAAAA\n-----END PRIVATE KEY-----\n"
}

// markerForms are the marker and its base64 at each of the three
// alignments it can have inside a longer base64 text.
func markerForms() []string {
	forms := []string{redactionMarker}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", pad) + redactionMarker))
		start := 0
		if pad > 0 {
			start = 4 // the first group mixes the padding in
		}
		forms = append(forms, enc[start:len(enc)-4])
	}
	return forms
}

// leak reports whether text shows the marker: in clear, in base64, or in
// a JSON string that decodes (base64) to text that does, recursively.
func leak(text string) bool {
	for _, f := range markerForms() {
		if strings.Contains(text, f) {
			return true
		}
	}
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return false
	}
	found := false
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil && len(d) > 0 && leak(string(d)) {
				found = true
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return found
}

// checkLog fails for each log line that shows the marker.
func checkLog(t *testing.T, logs *daemontest.LogBuffer) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("only %d log lines captured: is the logger wired?", len(lines))
	}
	for _, line := range lines {
		if leak(line) {
			t.Errorf("a log line shows the key: %.400s", line)
		}
	}
}

// adminCall sends one admin request with a bearer token and returns the
// status and the raw body.
func adminCall(t *testing.T, p *pylon, token, method, path string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.adminAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func fileToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// wrap64 wraps base64 at 64 columns, as a PEM file's body is.
func wrap64(s string) string {
	var lines []string
	for len(s) > 64 {
		lines, s = append(lines, s[:64]), s[64:]
	}
	return strings.Join(append(lines, s), "\n")
}

// keyDocument plants a key in every place the store takes one: a raw
// Secret, a raw Secret's certificate chain as a combined PEM file (its key
// past a 3-byte boundary of the base64, wrapped at 64 columns), and a
// model secret read from the key file in dir. A raw Listener's and a raw
// Cluster's TLS contexts name their keys by file: inline there, a key is
// refused (inlineKeyDocument).
func keyDocument(dir string) string {
	tls := func(typ, key string) string {
		return `{"name":"envoy.transport_sockets.tls","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.` + typ + `","commonTlsContext":{"tlsCertificates":[{"certificateChain":{"inlineString":"PUBLIC-CERT"},"privateKey":` + key + `}]}}}`
	}
	return `{
 "groups": [{"name": "edge", "match": {"id": "edge-*"}}],
 "services": [{"name": "web", "connect_timeout": "1s", "endpoints": [{"address": "127.0.0.1", "port": 8080}]}],
 "routes": [{"name": "web", "virtual_hosts": [{"name": "web", "domains": ["*"], "routes": [{"to": [{"service": "web"}]}]}]}],
 "listeners": [{"name": "https", "address": "127.0.0.1", "port": 8443, "routes": "web", "tls": {"secret": "model-cert"}}],
 "secrets": [{"name": "model-cert", "cert_file": ` + js(filepath.Join(dir, "tls.crt")) + `, "key_file": ` + js(filepath.Join(dir, "tls.key")) + `}],
 "resources": [
  {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "raw-secret",
   "tlsCertificate": {"certificateChain": {"inlineString": "PUBLIC-CERT"}, "privateKey": {"inlineString": ` + js(markedKey("rawsecret")) + `}}},
  {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "tls-upstream", "type": "STATIC", "connectTimeout": "1s",
   "loadAssignment": {"clusterName": "tls-upstream", "endpoints": [{"lbEndpoints": [{"endpoint": {"address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9443}}}}]}]},
   "transportSocket": ` + tls("UpstreamTlsContext", `{"filename":"/etc/keys/upstream.key"}`) + `},
  {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "combined-secret",
   "tlsCertificate": {"certificateChain": {"inlineBytes": ` + js(wrap64(base64.StdEncoding.EncodeToString([]byte("Bag Attributes\n localKeyID: 01\nPUBLIC-CERT\n"+markedKey("combined"))))) + `}, "privateKey": {"filename": "/etc/keys/combined.key"}}},
  {"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": "tls-in",
   "address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9444}},
   "filterChains": [{"filters": [{"name": "envoy.filters.network.tcp_proxy", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "statPrefix": "t", "cluster": "tls-upstream"}}],
    "transportSocket": ` + tls("DownstreamTlsContext", `{"filename":"/etc/keys/listener.key"}`) + `}]}
 ]
}`
}

// TestRedactionEverywhere plants a marked key in every place a key can
// live, has a raw xDS client receive them (the proxy must get its keys),
// then reads every dump, every API read, the CLI, the errors of refused
// writes and every log line, and finds the marker in none.
func TestRedactionEverywhere(t *testing.T) {
	dir := t.TempDir()
	writeAtomically(t, filepath.Join(dir, "tls.crt"), "-----BEGIN CERTIFICATE-----\nPUBLIC\n-----END CERTIFICATE-----\n")
	writeAtomically(t, filepath.Join(dir, "tls.key"), markedKey("modelfile"))
	logs := &daemontest.LogBuffer{}
	dataDir := filepath.Join(dir, "data")
	p, _ := runPylon(t, daemon.Options{
		DataDir: dataDir, SecretDirs: []string{dir}, InsecureServeSecrets: true,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	write, read := fileToken(t, filepath.Join(dataDir, "admin-token")), fileToken(t, filepath.Join(dataDir, "read-token"))

	code, body := adminCall(t, p, write, "POST", "/v1/apply", []byte(keyDocument(dir)))
	if code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	version := jsonField(body, "version")
	if !eventually(func() bool {
		_, s := adminCall(t, p, read, "GET", "/status", nil)
		return strings.Contains(s, version)
	}) {
		t.Fatal("the keyed config was not published")
	}

	t.Cleanup(func() {
		if t.Failed() {
			_, s := adminCall(t, p, read, "GET", "/proxies", nil)
			_, st := adminCall(t, p, read, "GET", "/status", nil)
			t.Logf("DEBUG proxies %.1500s\nstatus %.1500s\nlogs %.3000s", s, st, logs.String())
		}
	})
	proxyReceivesKeys(t, p)
	if !eventually(func() bool {
		_, s := adminCall(t, p, read, "GET", "/proxies/edge-1", nil)
		return strings.Contains(s, "raw-secret") && strings.Contains(s, "model-cert") && strings.Contains(s, "tls-in") && strings.Contains(s, "tls-upstream")
	}) {
		t.Fatal("/proxies/edge-1 never showed what the proxy was sent")
	}

	reads := []string{"/config", "/config?group=edge", "/proxies", "/proxies/edge-1", "/status", "/v1/objects", "/v1/history"}
	for _, o := range []string{"resources.Secret/raw-secret", "resources.Secret/combined-secret", "resources.Cluster/tls-upstream", "resources.Listener/tls-in", "secrets/model-cert"} {
		reads = append(reads, "/v1/objects/"+o)
	}
	var hist struct {
		History []struct{ Revision int64 } `json:"history"`
	}
	_, h := adminCall(t, p, read, "GET", "/v1/history", nil)
	if err := json.Unmarshal([]byte(h), &hist); err != nil || len(hist.History) == 0 {
		t.Fatalf("history: %v %s", err, h)
	}
	for _, e := range hist.History {
		reads = append(reads, fmt.Sprintf("/v1/history/%d", e.Revision))
	}
	for _, path := range reads {
		code, body := adminCall(t, p, read, "GET", path, nil)
		if code != http.StatusOK || leak(body) {
			t.Errorf("GET %s: %d shows the key: %.600s", path, code, body)
		}
	}
	if _, cfg := adminCall(t, p, read, "GET", "/config", nil); !strings.Contains(cfg, "[redacted]") || !strings.Contains(cfg, "PUBLIC-CERT") {
		t.Errorf("/config should keep the certificate and say what it took out: %.600s", cfg)
	}

	refusedWrites(t, p, write)
	cliOutputs(t, p, dataDir, hist.History[len(hist.History)-1].Revision)
	checkLog(t, logs)
}

// proxyReceivesKeys: a raw xDS client gets every planted key: what is
// redacted is the showing, not the serving.
func proxyReceivesKeys(t *testing.T, p *pylon) {
	t.Helper()
	s := xdstest.OpenADS(t, xdstest.Dial(t, p.xdsAddr), xdstest.Node("edge-1"))
	got := map[string]bool{}
	for _, req := range []struct {
		url   string
		names []string
		want  []string
	}{
		{xdstype.ListenerURL, nil, nil},
		{xdstype.ClusterURL, nil, nil},
		{xdstype.SecretURL, []string{"raw-secret", "model-cert", "combined-secret"}, []string{"rawsecret", "modelfile", "combined"}},
	} {
		s.Request(req.url, req.names...)
		r := s.RecvType(req.url)
		for _, res := range r.Resources {
			m, err := res.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			text, _ := protojson.Marshal(m)
			raw := string(res.Value)
			for _, w := range req.want {
				if strings.Contains(raw, redactionMarker+w) || strings.Contains(string(text), redactionMarker+w) {
					got[w] = true
				}
			}
		}
		s.ACK(r, req.names...)
	}
	for _, w := range []string{"rawsecret", "modelfile", "combined"} {
		if !got[w] {
			t.Errorf("the proxy did not receive the %s key: the test plants nothing there", w)
		}
	}
}

// refusedWrites: a write holding a key inline with a mistake elsewhere is
// refused without echoing the key, whichever part of Pylon refuses it.
func refusedWrites(t *testing.T, p *pylon, write string) {
	t.Helper()
	secret := func(privateKey string) string {
		return `{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"bad","tlsCertificate":{"privateKey":` + privateKey + `}}`
	}
	for name, req := range map[string][2]string{
		// The decoder quotes a value it cannot read: a PEM block as bytes.
		"undecodable bytes": {"/v1/apply", `{"resources":[` + secret(`{"inlineBytes":`+js(markedKey("refused1"))+`}`) + `]}`},
		// A string where a DataSource goes.
		"string for a DataSource": {"/v1/objects/resources.Secret/bad", secret(js(markedKey("refused2")))},
		// A good key, a route to a service that does not exist.
		"mistake elsewhere": {"/v1/apply", `{"resources":[` + secret(`{"inlineString":`+js(markedKey("refused3"))+`}`) + `],"routes":[{"name":"r","virtual_hosts":[{"name":"v","domains":["*"],"routes":[{"to":[{"service":"nope"}]}]}]}]}`},
		// Not YAML, the key in the middle.
		"not a document": {"/v1/apply", "resources: [\n" + markedKey("refused4") + "\n  - {"},
		// A key inline in a Listener: served to every client, refused.
		"inline in a listener": {"/v1/apply", `{"resources":[{"@type":"type.googleapis.com/envoy.config.listener.v3.Listener","name":"inline","address":{"socketAddress":{"address":"127.0.0.1","portValue":9445}},"filterChains":[{"filters":[{"name":"envoy.filters.network.tcp_proxy","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy","statPrefix":"t","cluster":"tls-upstream"}}],"transportSocket":{"name":"envoy.transport_sockets.tls","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext","commonTlsContext":{"tlsCertificates":[{"privateKey":{"inlineString":` + js(markedKey("refused5")) + `}}]}}}}]}]}`},
	} {
		code, body := adminCall(t, p, write, "POST", req[0], []byte(req[1]))
		if code != http.StatusBadRequest || leak(body) {
			t.Errorf("%s: %d %.600s", name, code, body)
		}
	}
}

// cliOutputs: what the CLI prints from the API holds no key either.
func cliOutputs(t *testing.T, p *pylon, dataDir string, firstRev int64) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "objects", "-o", "json"}, {"get", "objects", "-o", "yaml"}, {"get", "secrets", "-o", "yaml"},
		{"get", "listeners", "-o", "json"}, {"get", "clusters", "-o", "yaml"}, {"status", "edge-1"},
		{"history"}, {"diff", fmt.Sprint(firstRev)},
	} {
		var out, errb bytes.Buffer
		args = append(args, "--admin-addr", p.adminAddr, "--token-file", filepath.Join(dataDir, "admin-token"), "--read-token-file", filepath.Join(dataDir, "read-token"))
		code := cli.Execute(context.Background(), args, &out, &errb)
		if code != 0 {
			t.Errorf("pylon %v: exit %d: %s", args, code, errb.String())
		}
		if leak(out.String()) || leak(errb.String()) {
			t.Errorf("pylon %v shows the key: %.600s", args, out.String())
		}
	}
}

// TestRefusedFileConfigDoesNotEchoTheKey: in file mode the pipeline
// refuses a config whose key cannot be decoded; neither GET /status nor
// the log line quotes it.
func TestRefusedFileConfigDoesNotEchoTheKey(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pylon.yaml")
	good := `{"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connectTimeout":"1s"}]}`
	writeAtomically(t, cfg, good)
	logs := &daemontest.LogBuffer{}
	dataDir := filepath.Join(dir, "data")
	p, _ := runPylon(t, daemon.Options{ConfigPath: cfg, DataDir: dataDir, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	read := fileToken(t, filepath.Join(dataDir, "read-token"))
	bad := `{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":{"inlineBytes":` + js(markedKey("filemode")) + `}}}]}`
	writeAtomically(t, cfg, bad)
	var status string
	if !eventually(func() bool {
		_, status = adminCall(t, p, read, "GET", "/status", nil)
		return strings.Contains(status, `"refused"`)
	}) {
		t.Fatalf("the bad config was not refused: %s", status)
	}
	if leak(status) || !strings.Contains(status, "not valid base64") {
		t.Errorf("/status: %.800s", status)
	}
	if !strings.Contains(logs.String(), "config refused") {
		t.Fatalf("no refusal logged: %s", logs.String())
	}
	checkLog(t, logs)
}

// jsonField is one top-level string field of a JSON object.
func jsonField(body, field string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	s, _ := m[field].(string)
	return s
}
