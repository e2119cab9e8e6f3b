package matrix

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// refused: a private key inline in a Listener's DownstreamTlsContext or a
// Cluster's UpstreamTlsContext, or a JWKS with private members inline in
// jwt_authn, is refused at compile time (the lead's decision for finding
// 2): 400, naming the field and saying to use SDS, the key in no answer;
// and no client is sent one.
func (f *fleet) refused(t *testing.T) {
	r := f.reps[0]
	path := "/v1/apply"
	if f.state == "halted" {
		path += "?supersede=true" // refused for the key, not for the halt
	}
	var accepted []string // versions of writes wrongly accepted
	for _, w := range []struct {
		name, doc, field string
		sds              bool // the error must say to use SDS
	}{
		{"listener-key", `{"resources": [` + f.keyedListener() + `]}`, "private_key", true},
		{"cluster-key", `{"resources": [` + f.keyedCluster() + `]}`, "private_key", true},
		{"jwks", `{"resources": [` + f.jwksListener(t) + `]}`, "local_jwks", false},
	} {
		t.Run(w.name, func(t *testing.T) {
			code, body := r.call(t, r.writeTok, "POST", path, w.doc)
			if code != http.StatusBadRequest || !names(body, w.field) || (w.sds && !strings.Contains(body, "SDS")) {
				t.Errorf("finding 2: the write was answered %d, want 400 naming %s (and SDS: %v): %.600s", code, w.field, w.sds, body)
			}
			for _, m := range f.ms.in(body) {
				t.Errorf("the answer shows the %s key: %.600s", m, body)
			}
			if code == http.StatusOK {
				var res struct{ Version string }
				_ = json.Unmarshal([]byte(body), &res)
				accepted = append(accepted, res.Version)
			}
		})
	}
	t.Run("served", func(t *testing.T) {
		// Wrongly accepted writes (already failed above) are waited for
		// where they were made, to show what they serve; another
		// replica whose own rollout is halted may refuse them.
		if n := len(accepted); n > 0 {
			r.serves(t, accepted[n-1])
		}
		for _, r := range f.reps {
			c := client{id: "ent-after-refusal-" + r.name, canary: true}
			c.cert = f.cert(t, c.id)
			got := append(poll(t, f, r, c, "listeners"), poll(t, f, r, c, "clusters")...)
			for _, m := range f.ms.received(t, got) {
				t.Errorf("%s: an entitled canary was sent the %s key in its listeners or clusters (%s)", r.name, m, f.ms[m].finding)
			}
		}
	})
}

// names says whether text names field, as protojson or the proto writes
// it (privateKey or private_key).
func names(text, field string) bool {
	flat := strings.ToLower(strings.ReplaceAll(text, "_", ""))
	return strings.Contains(flat, strings.ReplaceAll(field, "_", ""))
}

// tlsSocket is a transport socket of typ whose certificate's key is key.
func (f *fleet) tlsSocket(typ, key string) string {
	return `{"name": "envoy.transport_sockets.tls", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.` + typ +
		`", "commonTlsContext": {"tlsCertificates": [{"certificateChain": {"inlineString": ` + js(f.ms["inline"].certPEM) + `}, "privateKey": ` + key + `}]}}}`
}

func (f *fleet) keyedListener() string {
	return `{"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": "keyed-in",
  "address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9444}},
  "filterChains": [{"filters": [{"name": "envoy.filters.network.tcp_proxy", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "statPrefix": "t", "cluster": "web"}}],
   "transportSocket": ` + f.tlsSocket("DownstreamTlsContext", `{"inlineString": `+js(f.ms["inline"].keyPEM)+`}`) + `}]}`
}

func (f *fleet) keyedCluster() string {
	return `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "keyed-out", "type": "STATIC", "connectTimeout": "1s",
  "transportSocket": ` + f.tlsSocket("UpstreamTlsContext", `{"inlineBytes": `+js(base64.StdEncoding.EncodeToString([]byte(f.ms["inline"].keyPEM)))+`}`) + `}`
}

func (f *fleet) jwksListener(t *testing.T) string {
	return `{"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": "jwt-in",
  "address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9445}},
  "filterChains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typedConfig": {
   "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "statPrefix": "jwt",
   "rds": {"routeConfigName": "local", "configSource": {"ads": {}, "resourceApiVersion": "V3"}},
   "httpFilters": [
    {"name": "envoy.filters.http.jwt_authn", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
     "providers": {"p": {"issuer": "matrix", "localJwks": {"inlineString": ` + js(f.ms["jwks"].jwks(t)) + `}}}}},
    {"name": "envoy.filters.http.router", "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`
}

// dumps: every read of the admin API (the dashboard's calls among them)
// and CSDS on the xDS port, on every replica, shows no key.
func (f *fleet) dumps(t *testing.T) {
	f.live(t)
	for _, r := range f.reps {
		for _, path := range f.readPaths(t, r) {
			code, body := r.call(t, r.token, "GET", path, "")
			if code != http.StatusOK {
				t.Errorf("%s GET %s: %d %.300s", r.name, path, code, body)
			}
			for _, m := range f.ms.in(body) {
				t.Errorf("%s GET %s shows the %s key (%s): %.600s", r.name, path, m, f.ms[m].finding, excerpt(body, f.ms[m]))
			}
		}
		f.csds(t, r)
	}
}

// live connects every role to every replica over SotW and ACKs what each
// is sent of the Secrets, clusters and listeners, so that the dumps of live proxies (their
// sent and ACKed resources, CSDS) have the keys to show.
func (f *fleet) live(t *testing.T) {
	t.Helper()
	for _, r := range f.reps {
		for _, role := range roles {
			c := client{id: role.prefix + "-live-" + r.name}
			if role.name != "unverified" {
				c.cert = f.cert(t, c.id)
			}
			s := xdstest.OpenADS(t, f.dial(t, r, c), c.node())
			s.Request(xdstype.SecretURL, secretNames...)
			if c.cert != nil {
				s.ACK(s.RecvType(xdstype.SecretURL), secretNames...)
			}
			s.Request(xdstype.ClusterURL)
			s.ACK(s.RecvType(xdstype.ClusterURL))
			// Listeners on their own stream: on ADS they would wait
			// for the quickstart's EDS clusters to warm.
			l := xdstest.OpenType(t, f.dial(t, r, c), registry.Lookup(xdstype.ListenerURL), c.node())
			l.Request(xdstype.ListenerURL)
			l.ACK(l.RecvType(xdstype.ListenerURL))
			waitUntil(t, c.id+" in /proxies", func() bool {
				return strings.Contains(r.get(t, "/proxies/"+c.id), `"acked"`)
			})
		}
	}
}

// readPaths are the admin reads: the dumps, the proxies of every cell, each
// stored object, each history entry and diff, and the dashboard's API.
func (f *fleet) readPaths(t *testing.T, r *replica) []string {
	t.Helper()
	paths := []string{
		"/config", "/config?group=edge", "/config?group=vault", "/status", "/proxies", "/proxies?group=vault",
		"/v1/objects", "/v1/history", "/v1/rollouts", "/summary", "/rollout",
	}
	var objs struct {
		Objects []struct{ Kind, Name string }
	}
	if err := json.Unmarshal([]byte(r.get(t, "/v1/objects")), &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs.Objects {
		paths = append(paths, "/v1/objects/"+o.Kind+"/"+url.PathEscape(o.Name))
	}
	var hist struct{ History []struct{ Revision int64 } }
	if err := json.Unmarshal([]byte(r.get(t, "/v1/history")), &hist); err != nil {
		t.Fatal(err)
	}
	for _, e := range hist.History {
		paths = append(paths, fmt.Sprintf("/v1/history/%d", e.Revision),
			fmt.Sprintf("/v1/diff?from=%d", e.Revision), fmt.Sprintf("/v1/diff?from=%d&format=yaml", e.Revision))
	}
	var proxies struct{ Streams []struct{ Node string } }
	if err := json.Unmarshal([]byte(r.get(t, "/proxies")), &proxies); err != nil || len(proxies.Streams) == 0 {
		t.Fatalf("%s /proxies lists no stream (%v)", r.name, err)
	}
	for _, p := range proxies.Streams {
		paths = append(paths, "/proxies/"+url.PathEscape(p.Node))
	}
	return paths
}

// csds asks r's xDS port for every node's status with the read token.
func (f *fleet) csds(t *testing.T, r *replica) {
	t.Helper()
	conn := xdstest.DialTLS(t, r.xds, f.tlsConfig(client{}))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.token)
	resp, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
	if err != nil {
		t.Fatalf("%s CSDS: %v", r.name, err)
	}
	if len(resp.GetConfig()) == 0 {
		t.Errorf("%s CSDS shows no node", r.name)
	}
	wire, _ := proto.Marshal(resp)
	text := string(wire) + protojson.Format(resp)
	for _, m := range f.ms.in(text) {
		t.Errorf("%s CSDS shows the %s key (%s)", r.name, m, f.ms[m].finding)
	}
}

// cliOutputs: what the CLI prints holds no key.
func (f *fleet) cliOutputs(t *testing.T) {
	r := f.reps[len(f.reps)-1]
	var hist struct{ History []struct{ Revision int64 } }
	if err := json.Unmarshal([]byte(r.get(t, "/v1/history")), &hist); err != nil || len(hist.History) == 0 {
		t.Fatalf("history: %v", err)
	}
	first := fmt.Sprint(hist.History[len(hist.History)-1].Revision)
	for _, args := range [][]string{
		{"get", "objects", "-o", "yaml"}, {"get", "objects", "-o", "json"}, {"get", "secrets", "-o", "yaml"},
		{"get", "listeners", "-o", "json"}, {"get", "clusters", "--group", "vault", "-o", "yaml"},
		{"history"}, {"diff", first}, {"diff", fmt.Sprint(f.revA)},
		{"status"}, {"rollout", "status", "-o", "json"},
	} {
		code, out := r.cli(t, args...)
		if code != 0 && args[0] != "status" {
			t.Errorf("pylon %s: exit %d: %.400s", strings.Join(args, " "), code, out)
		}
		for _, m := range f.ms.in(out) {
			t.Errorf("pylon %s shows the %s key (%s): %.600s", strings.Join(args, " "), m, f.ms[m].finding, excerpt(out, f.ms[m]))
		}
	}
}

// excerpt is the part of text around the first needle of m it holds in
// clear (or the start of text, when only a decoding shows it): enough to
// find the path, never the key itself.
func excerpt(text string, m *marker) string {
	for _, n := range m.needles {
		if i := strings.Index(text, n); i >= 0 {
			return text[max(0, i-200):i] + "[KEY]"
		}
	}
	return text[:min(len(text), 200)] + "..."
}
