package admin

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/nodegroup"
	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/redact"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/status"
	"github.com/pylon-xds/pylon/internal/store"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const marker = "MARKER-ADMIN-5150"

// pemKey is a private key block whose body holds the marker.
var pemKey = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN" + marker + "\n-----END PRIVATE KEY-----\n"

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// keyDocument stores a key in a Secret, the one place the API takes one.
func keyDocument() string {
	k := jsonString(pemKey)
	return `{"resources":[
 {"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"certificateChain":{"inlineString":"CERT"},"privateKey":{"inlineString":` + k + `}}}
]}`
}

// inlineKeyObjects are a Listener and a Cluster holding a key inline, as
// a store written before the output gate refused them holds them: their
// bodies must be redacted on every read, the history's too.
func inlineKeyObjects() []store.Change {
	k := jsonString(pemKey)
	return []store.Change{
		{Key: store.Key{Kind: "resources.Cluster", Name: "c"}, Body: []byte(`{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"c","connectTimeout":"1s","transportSocket":{"name":"envoy.transport_sockets.tls","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext","commonTlsContext":{"tlsCertificates":[{"privateKey":{"inlineString":` + k + `}}]}}}}`)},
		{Key: store.Key{Kind: "resources.Listener", Name: "l"}, Body: []byte(`{"@type":"type.googleapis.com/envoy.config.listener.v3.Listener","name":"l","address":{"socketAddress":{"address":"127.0.0.1","portValue":8443}},"filterChains":[{"filters":[{"name":"envoy.filters.network.tcp_proxy","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy","statPrefix":"t","cluster":"c"}}],"transportSocket":{"name":"envoy.transport_sockets.tls","typedConfig":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext","commonTlsContext":{"tlsCertificates":[{"privateKey":{"inlineBytes":` + jsonString(base64.StdEncoding.EncodeToString([]byte(pemKey))) + `}}]}}}}]}`)},
	}
}

// leaks reports whether a response shows the marker, in clear or in the
// base64 a []byte body is encoded in.
func leaks(body string) bool {
	if strings.Contains(body, marker) {
		return true
	}
	var anyJSON any
	_ = json.Unmarshal([]byte(body), &anyJSON)
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil && (strings.Contains(string(d), marker) || leaks(string(d))) {
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
	walk(anyJSON)
	return found
}

// TestStoredBodiesAreRedacted: what the API stores (the proxy gets the
// key) it never shows, on any read of the objects or the history.
func TestStoredBodiesAreRedacted(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(keyDocument()))
	if code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	stored, err := h.store.Get(t.Context(), store.Key{Kind: "resources.Secret", Name: "s"})
	if err != nil || !strings.Contains(string(stored.Body), marker) {
		t.Fatalf("the store should hold the key itself: %v", err)
	}
	if _, err := h.store.Commit(t.Context(), inlineKeyObjects(), &store.Entry{Summary: "written before the gate"}, 0); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/objects", "/v1/objects/resources.Secret/s", "/v1/objects/resources.Cluster/c", "/v1/objects/resources.Listener/l", "/v1/history", "/v1/history/1", "/v1/history/2", "/v1/diff?from=1", "/v1/diff?from=1&format=diff"} {
		code, _ := h.do(t, "GET", path, readTok+"x", nil)
		if code != http.StatusUnauthorized {
			t.Fatalf("%s without the right token: %d", path, code)
		}
		code, body := h.do(t, "GET", path, writeTok, nil)
		if code != http.StatusOK || leaks(body) {
			t.Errorf("%s: %d leaks the key: %.600s", path, code, body)
		}
	}
	var obj object
	_, body = h.do(t, "GET", "/v1/objects/resources.Secret/s", writeTok, nil)
	decode(t, body, &obj)
	var fields map[string]any
	if err := json.Unmarshal(obj.Body, &fields); err != nil || fields["name"] != "s" {
		t.Fatalf("the body should be shown as the JSON it is, not base64: %s", obj.Body)
	}
	if !strings.Contains(string(obj.Body), "[redacted]") || !strings.Contains(string(obj.Body), "CERT") {
		t.Fatalf("the redacted body should keep the certificate and say what went: %s", obj.Body)
	}
}

// TestRefusedWriteDoesNotEchoTheKey: a body holding a key inline with a
// mistake elsewhere is refused without the key in the error, on every
// write route that takes a body.
func TestRefusedWriteDoesNotEchoTheKey(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	k := jsonString(pemKey)
	bad := map[string]string{
		// protojson quotes a value it cannot read: a PEM block as bytes.
		"/v1/apply": `{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":{"inlineBytes":` + k + `}}}]}`,
		// A string where a DataSource goes.
		"/v1/objects/resources.Secret/s": `{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"s","tlsCertificate":{"privateKey":` + k + `}}`,
		// Not YAML at all, the key in the middle.
		"/v1/apply?dryRun=true": "resources: [\n" + pemKey + "\n  - {",
	}
	for path, doc := range bad {
		code, body := h.do(t, "POST", path, writeTok, []byte(doc))
		if code != http.StatusBadRequest || leaks(body) {
			t.Errorf("POST %s: %d %.600s", path, code, body)
		}
	}
}

// TestStatusTextsAreScrubbed: texts that come from elsewhere and may quote
// a config (a proxy's NACK detail, a refusal that is not a diagnostic
// list) are scrubbed on the way out, and the sources' values are left
// alone.
func TestStatusTextsAreScrubbed(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	nack := &status.NACK{Version: "v1", Detail: "Failed to load private key: " + pemKey}
	h.src.streams = []status.Stream{{Node: "edge-1", Types: []*status.Type{{Type: "LDS", LastNACK: nack}, {Type: "CDS"}}}}
	h.src.status = pipeline.Status{Refused: &pipeline.Refusal{Error: "source: " + pemKey}}
	for _, path := range []string{"/proxies", "/proxies/edge-1", "/status"} {
		code, body := h.do(t, "GET", path, writeTok, nil)
		if code != http.StatusOK || leaks(body) || !strings.Contains(body, "[redacted]") {
			t.Errorf("%s: %d %.600s", path, code, body)
		}
	}
	if !strings.Contains(nack.Detail, marker) || !strings.Contains(h.src.status.Refused.Error, marker) {
		t.Fatal("scrubbing changed the tracker's or the pipeline's own values")
	}
}

// keyFleet is a fleet of two groups: "edge" serves two Secrets with a
// private key inline, one as a string and one as bytes, and a cluster;
// "web" serves a plain cluster. (A key inline in a Cluster's TLS context
// no longer builds: the output gate refuses key material outside a
// Secret.)
func keyFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	reg := xdstype.New()
	cluster := func(name string) *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second), ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	}
	secret := func(name string, key *corev3.DataSource) xdstype.Resource {
		return xdstype.Resource{Type: reg.Lookup(xdstype.SecretURL), Name: name, Message: &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "CERT"}},
			PrivateKey:       key,
		}}}}
	}
	edge, err := snapshot.Build(reg, []xdstype.Resource{
		secret("s", &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pemKey}}),
		secret("s2", &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(pemKey)}}),
		{Type: reg.Lookup(xdstype.ClusterURL), Name: "c", Message: cluster("c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	web, err := snapshot.Build(reg, []xdstype.Resource{{Type: reg.Lookup(xdstype.ClusterURL), Name: "w", Message: cluster("w")}})
	if err != nil {
		t.Fatal(err)
	}
	return fleet.NewGroupedFleet(nodegroup.Groups{{Name: "edge"}, {Name: "web", Default: true}}, []*snapshot.Snapshot{edge, web})
}

// TestConfigDumpIsRedacted: /config shows every group's resources, the
// keys in them replaced by "[redacted]" (inline as a string and as
// bytes), the certificate kept; so does /config?group= for one
// group. The fleet's own resources, which the proxies are sent, keep
// their keys.
func TestConfigDumpIsRedacted(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	h.src.fleet = keyFleet(t)
	for _, c := range []struct {
		path   string
		groups []string
		keys   int // "[redacted]" shown
	}{
		{"/config", []string{"edge", "web"}, 2},
		{"/config?group=edge", []string{"edge"}, 2},
		{"/config?group=web", []string{"web"}, 0},
	} {
		code, body := h.do(t, "GET", c.path, readTok, nil)
		if code != http.StatusOK || leaks(body) {
			t.Fatalf("%s: %d leaks the key: %.600s", c.path, code, body)
		}
		var dump struct {
			Groups []struct {
				Name      string                       `json:"name"`
				Resources map[string][]json.RawMessage `json:"resources"`
			} `json:"groups"`
		}
		decode(t, body, &dump)
		var names []string
		for _, g := range dump.Groups {
			names = append(names, g.Name)
		}
		if !slices.Equal(names, c.groups) {
			t.Errorf("%s: groups %v, want %v", c.path, names, c.groups)
		}
		if n := strings.Count(body, `"`+redact.Redacted+`"`); n != c.keys {
			t.Errorf("%s: %d keys shown as %s, want %d: %.600s", c.path, n, redact.Redacted, c.keys, body)
		}
		if c.keys > 0 && !strings.Contains(body, `"CERT"`) {
			t.Errorf("%s: the certificate went with the key: %.600s", c.path, body)
		}
	}
	edge, _ := h.src.fleet.Lookup("edge")
	secret := edge.Snapshot.Set(xdstype.SecretURL).Get("s").Message.(*tlsv3.Secret)
	if !strings.Contains(secret.GetTlsCertificate().GetPrivateKey().GetInlineString(), marker) {
		t.Fatal("the dump redacted the served Secret itself: proxies would be sent no key")
	}
}

// TestPreviousConfigDump: /config?previous=true&group= shows the version
// the nodes outside a staged rollout's stage run, redacted like /config;
// a group in no rollout has none (404, saying so).
func TestPreviousConfigDump(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok, ReadToken: readTok}, nil)
	keys := keyFleet(t)
	edge, _ := keys.Lookup("edge")
	web, _ := keys.Lookup("web")
	rules := nodegroup.Groups{{Name: "edge", Rollout: &nodegroup.Rollout{Stages: []nodegroup.Stage{{Share: 0.5}}}}, {Name: "web", Default: true}}
	h.src.fleet = fleet.NewGroupedFleet(rules, []*snapshot.Snapshot{web.Snapshot, web.Snapshot}).Staged("edge", edge.Snapshot, 1)

	code, body := h.do(t, "GET", "/config?previous=true&group=edge", readTok, nil)
	if code != http.StatusOK || leaks(body) || strings.Count(body, `"`+redact.Redacted+`"`) != 2 || !strings.Contains(body, `"name": "c"`) {
		t.Errorf("the previous version of edge: %d %.600s", code, body)
	}
	code, body = h.do(t, "GET", "/config?previous=true&group=web", readTok, nil)
	if code != http.StatusNotFound || !strings.Contains(body, "in no staged rollout") {
		t.Errorf("the previous version of a group in no rollout: %d %s", code, body)
	}
}
