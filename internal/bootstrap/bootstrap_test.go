package bootstrap

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// Register the typed extension options so the YAML's Any resolves.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/pylon-xds/pylon/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// parseEnvoy reads Envoy's bootstrap back and validates it as Envoy would.
func parseEnvoy(t *testing.T, y []byte) *bootstrapv3.Bootstrap {
	t.Helper()
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("bootstrap does not parse: %v\n%s", err, y)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("bootstrap invalid: %v", err)
	}
	return &b
}

// The YAML must parse back into Envoy's Bootstrap and pass its validation.
func TestEnvoyBootstrapValidates(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		apiType   corev3.ApiConfigSource_ApiType
		static    bool
		xdsHostIs string
	}{
		{"sotw ip", Options{NodeID: "n1", NodeCluster: "c1", XDSAddress: "127.0.0.1:18000"}, corev3.ApiConfigSource_GRPC, true, "127.0.0.1"},
		{"delta dns", Options{NodeID: "n2", XDSAddress: "pylon.internal:18000", Delta: true}, corev3.ApiConfigSource_DELTA_GRPC, false, "pylon.internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y, err := EnvoyYAML(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			b := parseEnvoy(t, y)
			if b.GetNode().GetId() != c.opts.NodeID || b.GetNode().GetCluster() != c.opts.NodeCluster {
				t.Fatalf("node %v", b.GetNode())
			}
			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetApiType() != c.apiType || ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "xds_cluster" {
				t.Fatalf("ads_config %v", ads)
			}
			if b.GetDynamicResources().GetCdsConfig().GetAds() == nil || b.GetDynamicResources().GetLdsConfig().GetAds() == nil {
				t.Fatal("CDS and LDS must come from ADS")
			}
			xc := b.GetStaticResources().GetClusters()[0]
			if xc.GetName() != "xds_cluster" || len(xc.GetTypedExtensionProtocolOptions()) != 1 {
				t.Fatalf("xds cluster %v", xc)
			}
			sa := xc.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != c.xdsHostIs || sa.GetPortValue() != 18000 {
				t.Fatalf("xds endpoint %v", sa)
			}
			if got := b.GetAdmin().GetAddress().GetSocketAddress().GetAddress(); got != "127.0.0.1" {
				t.Fatalf("admin binds %q, want loopback", got)
			}
		})
	}
}

func TestBootstrapErrors(t *testing.T) {
	if _, err := EnvoyYAML(Options{XDSAddress: "127.0.0.1:1"}); err == nil {
		t.Error("no node id: want an error")
	}
	if _, err := GRPC(Options{NodeID: "n", XDSAddress: "no-port"}); err == nil {
		t.Error("bad address: want an error")
	}
}

func TestGRPCBootstrapShape(t *testing.T) {
	out, err := GRPC(Options{NodeID: "n1", NodeCluster: "c1", XDSAddress: "127.0.0.1:18000"})
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	srv := b["xds_servers"].([]any)[0].(map[string]any)
	if srv["server_uri"] != "127.0.0.1:18000" {
		t.Fatalf("server_uri %v", srv["server_uri"])
	}
	if b["node"].(map[string]any)["id"] != "n1" {
		t.Fatalf("node %v", b["node"])
	}
}

var tlsFiles = TLS{CAFile: "/etc/pylon/ca.crt", CertFile: "/etc/pylon/node.crt", KeyFile: "/etc/pylon/node.key"}

// With TLS, the xds_cluster verifies Pylon's chain and name, presents the
// node's certificate by file name (never its contents), and passes Envoy's
// validation.
func TestEnvoyBootstrapTLS(t *testing.T) {
	for _, c := range []struct {
		name, addr, serverName string
		sni                    string
		sanType                tlsv3.SubjectAltNameMatcher_SanType
		san                    string
	}{
		{"ip", "127.0.0.1:18000", "", "", tlsv3.SubjectAltNameMatcher_IP_ADDRESS, "127.0.0.1"},
		{"dns", "pylon.internal:18000", "", "pylon.internal", tlsv3.SubjectAltNameMatcher_DNS, "pylon.internal"},
		{"server name", "10.0.0.7:18000", "pylon.example.org", "pylon.example.org", tlsv3.SubjectAltNameMatcher_DNS, "pylon.example.org"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := tlsFiles
			files.ServerName = c.serverName
			y, err := EnvoyYAML(Options{NodeID: "edge-1", NodeCluster: "edge", XDSAddress: c.addr, TLS: &files})
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "server name" {
				golden.Check(t, filepath.Join("testdata", "envoy-tls.yaml"), string(y), *update)
			}
			b := parseEnvoy(t, y)
			ts := b.GetStaticResources().GetClusters()[0].GetTransportSocket()
			var up tlsv3.UpstreamTlsContext
			if ts.GetName() != "envoy.transport_sockets.tls" || ts.GetTypedConfig().UnmarshalTo(&up) != nil {
				t.Fatalf("transport socket %v", ts)
			}
			if up.GetSni() != c.sni {
				t.Errorf("sni %q, want %q", up.GetSni(), c.sni)
			}
			vc := up.GetCommonTlsContext().GetValidationContext()
			if vc.GetTrustedCa().GetFilename() != files.CAFile {
				t.Errorf("trusted CA %v", vc.GetTrustedCa())
			}
			sans := vc.GetMatchTypedSubjectAltNames()
			if len(sans) != 1 || sans[0].GetSanType() != c.sanType || sans[0].GetMatcher().GetExact() != c.san {
				t.Errorf("Pylon's name is not checked as %v %q: %v", c.sanType, c.san, sans)
			}
			certs := up.GetCommonTlsContext().GetTlsCertificates()
			if len(certs) != 1 || certs[0].GetCertificateChain().GetFilename() != files.CertFile || certs[0].GetPrivateKey().GetFilename() != files.KeyFile {
				t.Errorf("client certificate %v", certs)
			}
			if got := up.GetCommonTlsContext().GetTlsParams().GetTlsMinimumProtocolVersion(); got != tlsv3.TlsParameters_TLSv1_2 {
				t.Errorf("minimum TLS version %v", got)
			}
		})
	}
}

// gRPC's bootstrap names the files for its file_watcher provider. (grpc-go
// parses a bootstrap only when its resolver is built: the end-to-end tests in
// test/integration prove it connects with this one.)
func TestGRPCBootstrapTLS(t *testing.T) {
	files := tlsFiles
	files.RefreshInterval = 90 * time.Second
	out, err := GRPC(Options{NodeID: "app-1", NodeCluster: "apps", XDSAddress: "localhost:18000", TLS: &files})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "grpc-tls.json"), string(out), *update)
	// Only a CA: TLS without a client certificate.
	out, err = GRPC(Options{NodeID: "app-1", XDSAddress: "localhost:18000", TLS: &TLS{CAFile: "/ca.crt"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), `"certificate_file"`) || !strings.Contains(string(out), `"refresh_interval": "60s"`) {
		t.Fatalf("CA-only bootstrap:\n%s", out)
	}
}

func TestBootstrapTLSErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		tls  TLS
		grpc bool
		want string
	}{
		{"no CA", TLS{CertFile: "a", KeyFile: "b"}, false, "--ca-file"},
		{"cert without key", TLS{CAFile: "ca", CertFile: "a"}, true, "both --cert-file and --key-file"},
		{"grpc server name", TLS{CAFile: "ca", ServerName: "other.example"}, true, "--xds-address"},
		{"negative refresh", TLS{CAFile: "ca", RefreshInterval: -time.Second}, true, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{NodeID: "n", XDSAddress: "pylon.internal:18000", TLS: &c.tls}
			var err error
			if c.grpc {
				_, err = GRPC(o)
			} else {
				_, err = EnvoyYAML(o)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// Issue 13 item 10: grpc-js-xds refuses a node without a "locality" object
// ("locality field missing in node element"), so every gRPC bootstrap has
// one, empty when no --locality is given. test/interop runs grpc-js on it.
func TestGRPCBootstrapAlwaysHasLocality(t *testing.T) {
	for _, o := range []Options{
		{NodeID: "n1", XDSAddress: "127.0.0.1:18000"},
		{NodeID: "n1", XDSAddress: "127.0.0.1:18000", TLS: &TLS{CAFile: "/ca.crt"}},
	} {
		out, err := GRPC(o)
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Node map[string]json.RawMessage `json:"node"`
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if loc, ok := b.Node["locality"]; !ok || string(loc) != "{}" {
			t.Fatalf("node.locality = %q, want an empty object:\n%s", loc, out)
		}
		if _, ok := b.Node["metadata"]; ok {
			t.Fatalf("node.metadata without --metadata:\n%s", out)
		}
	}
}

var nodeOpts = Options{
	NodeID: "app-1", NodeCluster: "apps", XDSAddress: "127.0.0.1:18000",
	Locality: Locality{Region: "eu-west1", Zone: "eu-west1-b", SubZone: "rack-7"},
	Metadata: map[string]string{"mesh": "true", "team": "payments", "expr": "a=b"},
}

// The locality and metadata groups match on, in the gRPC bootstrap.
func TestGRPCBootstrapNode(t *testing.T) {
	out, err := GRPC(nodeOpts)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "grpc-node.json"), string(out), *update)
	// Only a zone: the other fields are left out, not written empty.
	o := nodeOpts
	o.Locality, o.Metadata = Locality{Zone: "z"}, nil
	if out, err = GRPC(o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"locality": {
      "zone": "z"
    }`) {
		t.Fatalf("zone-only locality:\n%s", out)
	}
}

// The same in Envoy's bootstrap, which must still pass Envoy's validation.
func TestEnvoyBootstrapNode(t *testing.T) {
	y, err := EnvoyYAML(nodeOpts)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "envoy-node.yaml"), string(y), *update)
	n := parseEnvoy(t, y).GetNode()
	if l := n.GetLocality(); l.GetRegion() != "eu-west1" || l.GetZone() != "eu-west1-b" || l.GetSubZone() != "rack-7" {
		t.Errorf("locality %v", l)
	}
	for k, v := range nodeOpts.Metadata {
		if got := n.GetMetadata().GetFields()[k].GetStringValue(); got != v {
			t.Errorf("metadata %q = %q, want %q", k, got, v)
		}
	}
	// No --locality: no locality at all (Envoy does not need one).
	y, err = EnvoyYAML(Options{NodeID: "n", XDSAddress: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := parseEnvoy(t, y).GetNode(); n.GetLocality() != nil || n.GetMetadata() != nil {
		t.Errorf("node without --locality or --metadata: %v", n)
	}
}

func TestParseLocality(t *testing.T) {
	for in, want := range map[string]Locality{
		"eu-west1":               {Region: "eu-west1"},
		"eu-west1/eu-west1-b":    {Region: "eu-west1", Zone: "eu-west1-b"},
		"eu-west1/eu-west1-b/r7": {Region: "eu-west1", Zone: "eu-west1-b", SubZone: "r7"},
		"/zone-a":                {Zone: "zone-a"},
		"//r7":                   {SubZone: "r7"},
	} {
		got, err := ParseLocality(in)
		if err != nil || got != want {
			t.Errorf("ParseLocality(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "//", "a/b/c/d"} {
		if l, err := ParseLocality(in); err == nil || !strings.Contains(err.Error(), "region[/zone[/sub_zone]]") {
			t.Errorf("ParseLocality(%q) = %+v, %v; want an error saying the form", in, l, err)
		}
	}
}

func TestParseMetadata(t *testing.T) {
	got, err := ParseMetadata([]string{"mesh=true", "expr=a=b", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mesh": "true", "expr": "a=b", "empty": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%q = %q, want %q", k, g, v)
		}
	}
	if m, err := ParseMetadata(nil); m != nil || err != nil {
		t.Errorf("no pairs: %v, %v", m, err)
	}
	for in, msg := range map[string]string{
		"novalue":       "want key=value",
		"=v":            "want key=value",
		"mesh=a,mesh=b": `key "mesh" given twice`,
		"empty=,empty=": `key "empty" given twice`,
	} {
		if _, err := ParseMetadata(strings.Split(in, ",")); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseMetadata(%q): %v, want %q", in, err, msg)
		}
	}
}

// Node fields that Pylon would refuse from the client, or that JSON would
// silently change, are refused when the bootstrap is printed, in both forms.
func TestBootstrapNodeErrors(t *testing.T) {
	many := map[string]string{}
	for i := range maxMetadata + 1 {
		many[strconv.Itoa(i)] = "v"
	}
	long := strings.Repeat("x", maxNodeField+1)
	big := map[string]string{}
	for i := range 20 {
		big[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 1000)
	}
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"too many keys", Options{Metadata: many}, "65 keys; at most 64"},
		{"long value", Options{Metadata: map[string]string{"k": long}}, `metadata["k"]: 1025 bytes`},
		{"too many bytes", Options{Metadata: big}, "20060 bytes of keys and values; at most 16384"},
		{"long key", Options{Metadata: map[string]string{long: "v"}}, "key: 1025 bytes"},
		{"empty key", Options{Metadata: map[string]string{"": "v"}}, "empty key"},
		{"bad utf-8", Options{Locality: Locality{Zone: "\xff"}}, "locality.zone: not valid UTF-8"},
		{"long cluster", Options{NodeCluster: long}, "cluster: 1025 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.NodeID, o.XDSAddress = "n", "127.0.0.1:18000"
			if _, err := GRPC(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("gRPC: %v, want %q", err, c.want)
			}
			if _, err := EnvoyYAML(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Envoy: %v, want %q", err, c.want)
			}
		})
	}
}

// An xDS-enabled server's bootstrap (gRFC A36) names the Listener it
// fetches for its address, and --cert-dir is the certificate provider
// instance its TLS from xDS uses (A29): file names, never contents.
func TestGRPCBootstrapServer(t *testing.T) {
	o := Options{NodeID: "greeter-1", NodeCluster: "greeter-servers", XDSAddress: "127.0.0.1:18000", Server: true, CertDir: "/etc/greeter/certs"}
	out, err := GRPC(o)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "grpc-server.json"), string(out), *update)
	// A client has no template, and no providers without --cert-dir.
	o.Server, o.CertDir = false, ""
	if out, err = GRPC(o); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"server_listener_resource_name_template", "certificate_providers"} {
		if strings.Contains(string(out), key) {
			t.Errorf("a client's bootstrap without --cert-dir has %s:\n%s", key, out)
		}
	}
}
