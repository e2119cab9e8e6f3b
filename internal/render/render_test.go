package render

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/pylon-xds/pylon/internal/bootstrap"
	"github.com/pylon-xds/pylon/internal/certs/certstest"
	"github.com/pylon-xds/pylon/internal/compile"
	"github.com/pylon-xds/pylon/internal/config"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

const envoyDir = "/etc/envoy/xds"

// tlsConfig has every kind of reference render rewrites: clusters over
// EDS, a listener over RDS, Secrets over SDS from a listener and from a
// cluster, and a service with no endpoints (an empty assignment).
const tlsConfig = `
services:
- name: cart
  endpoints: [{ address: 10.0.1.10, port: 8080 }]
  tls: { sni: cart.internal, ca: mesh-ca, client_cert: edge-cert }
- name: web
  endpoints: [{ address: 10.0.1.20, port: 8080 }]
routes:
- name: shop
  virtual_hosts:
  - name: shop
    domains: ["*"]
    routes:
    - match: { prefix: /cart }
      to: [{ service: cart }]
    - to: [{ service: web }]
listeners:
- { name: https, port: 8443, routes: shop, tls: { secret: edge-cert } }
secrets:
- { name: edge-cert, cert_file: edge.crt, key_file: edge.key }
- { name: mesh-ca, ca_file: edge-ca.crt }
`

// compiled compiles a config written in a temporary folder (with a CA
// and a certificate for the secrets) and returns its only group's snapshot.
func compiled(t *testing.T, doc string) *snapshot.Snapshot {
	t.Helper()
	dir := t.TempDir()
	ca := certstest.NewCA(t, "render-ca")
	ca.Issue(t, certstest.Server("edge.internal")).Write(t, ca, dir, "edge")
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []config.File{{Path: p, Data: []byte(doc), Dir: dir}}
	fleet, err := compile.Compile(xdstype.New(), files, compile.LimitedReader)
	if err != nil {
		t.Fatal(err)
	}
	return fleet.Groups()[0].Snapshot
}

func opts(secrets bool) Options {
	return Options{EnvoyDir: envoyDir, Node: bootstrap.Options{NodeID: "edge-1", NodeCluster: "edge"}, IncludeSecrets: secrets}
}

// parse reads a rendered file as Envoy does: a DiscoveryResponse in YAML.
func parse(t *testing.T, f File) *discoveryv3.DiscoveryResponse {
	t.Helper()
	js, err := yaml.YAMLToJSON(f.Data)
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	resp := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(js, resp); err != nil {
		t.Fatalf("%s: not a DiscoveryResponse: %v", f.Name, err)
	}
	return resp
}

// sources are the config sources anywhere in m, through Anys.
func sources(t *testing.T, m protoreflect.Message, out *[]*corev3.ConfigSource) {
	t.Helper()
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		sources(t, inner.ProtoReflect(), out)
		return
	}
	if cs, ok := m.Interface().(*corev3.ConfigSource); ok {
		*out = append(*out, cs)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			for i := range v.List().Len() {
				sources(t, v.List().Get(i).Message(), out)
			}
		default:
			sources(t, v.Message(), out)
		}
		return true
	})
}

// TestX43_RenderedFilesAreWhatEnvoyLoads: every file parses as a
// DiscoveryResponse of its type, every resource passes Envoy's proto
// validation, the bootstrap is a valid Bootstrap reading lds.yaml and
// cds.yaml, and every config source left points at a rendered file in the
// folder Envoy reads and watches it: nothing reaches for ADS.
func TestX43_RenderedFilesAreWhatEnvoyLoads(t *testing.T) {
	files, err := Render(compiled(t, tlsConfig), opts(true))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]File{}
	var order []string
	for _, f := range files {
		byName[f.Name] = f
		order = append(order, f.Name)
	}
	want := "sds-edge-cert.yaml sds-mesh-ca.yaml eds-cart.yaml eds-web.yaml cds.yaml rds-shop.yaml lds.yaml bootstrap.yaml"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("files in write order:\n got %s\nwant %s", got, want)
	}
	types := map[string]string{"lds": xdstype.ListenerURL, "cds": xdstype.ClusterURL, "rds": xdstype.RouteURL, "eds": xdstype.EndpointURL, "sds": xdstype.SecretURL}
	var refs []*corev3.ConfigSource
	for _, f := range files {
		if f.Name == BootstrapFile {
			continue
		}
		resp := parse(t, f)
		prefix, _, _ := strings.Cut(strings.TrimSuffix(f.Name, ".yaml"), "-")
		if resp.TypeUrl != types[prefix] || resp.VersionInfo == "" || len(resp.Resources) == 0 {
			t.Errorf("%s: type %s, version %q, %d resources", f.Name, resp.TypeUrl, resp.VersionInfo, len(resp.Resources))
		}
		for _, a := range resp.Resources {
			m, err := a.UnmarshalNew()
			if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			if err := m.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
				t.Errorf("%s: %v", f.Name, err)
			}
			if n := xdstype.NameOf(m); prefix != "lds" && prefix != "cds" && f.Name != prefix+"-"+n+".yaml" {
				t.Errorf("%s holds %q: a per-name file holds the resource of its name", f.Name, n)
			}
			sources(t, m.ProtoReflect(), &refs)
		}
	}
	b := &bootstrapv3.Bootstrap{}
	js, err := yaml.YAMLToJSON(byName[BootstrapFile].Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js, b); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Errorf("bootstrap: %v", err)
	}
	if b.GetNode().GetId() != "edge-1" || b.GetNode().GetCluster() != "edge" || b.GetStaticResources() != nil {
		t.Errorf("bootstrap node %v, static %v", b.GetNode(), b.GetStaticResources())
	}
	refs = append(refs, b.GetDynamicResources().GetLdsConfig(), b.GetDynamicResources().GetCdsConfig())
	if len(refs) < 7 { // lds, cds, rds, 2 eds, sds from the listener and 2 from the cluster
		t.Errorf("%d config sources found", len(refs))
	}
	for _, cs := range refs {
		p := cs.GetPathConfigSource()
		if p == nil || path.Dir(p.GetPath()) != envoyDir || p.GetWatchedDirectory().GetPath() != envoyDir {
			t.Errorf("config source %v: want a file in %s, watching it", cs, envoyDir)
			continue
		}
		if _, ok := byName[path.Base(p.GetPath())]; !ok {
			t.Errorf("config source points at %s, which is not rendered", p.GetPath())
		}
	}
}

// TestSecretsNeedTheFlag: a Secret with a private key is refused without
// IncludeSecrets, naming it, and the error holds no key material.
func TestSecretsNeedTheFlag(t *testing.T) {
	snap := compiled(t, tlsConfig)
	_, err := Render(snap, opts(false))
	if err == nil || !strings.Contains(err.Error(), `Secret "edge-cert" holds private key material`) || !strings.Contains(err.Error(), "--include-secrets") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("the error quotes the key: %v", err)
	}
	// A CA alone is no key material: a config without the key pair renders.
	noKey := strings.Replace(tlsConfig, "- { name: edge-cert, cert_file: edge.crt, key_file: edge.key }\n", "", 1)
	noKey = strings.Replace(noKey, ", client_cert: edge-cert", "", 1)
	noKey = strings.Replace(noKey, ", tls: { secret: edge-cert }", "", 1)
	if _, err := Render(compiled(t, noKey), opts(false)); err != nil {
		t.Fatalf("a CA secret alone: %v", err)
	}
}

// TestUnsafeNamesAreHashed: a name that is no safe file name (a slash, an
// xdstp:// name) gets its safe characters and a hash, and the config
// source points at that file.
func TestUnsafeNamesAreHashed(t *testing.T) {
	n := &names{dir: envoyDir, byFile: map[string]string{}}
	for name, want := range map[string]string{
		"cart":                   "eds-cart.yaml",
		"../etc/passwd":          "eds-___etc_passwd-",
		"xdstp://a/b/c":          "eds-xdstp___a_b_c-",
		"a..b":                   "eds-a__b-",
		strings.Repeat("x", 101): "eds-" + strings.Repeat("x", 60) + "-",
	} {
		got := n.perName(edsURL, name)
		if !strings.HasPrefix(got, want) || strings.Contains(got, "/") || !Owned(got) {
			t.Errorf("%q: file %q, want %q...", name, got, want)
		}
	}
	if n.err != nil {
		t.Fatal(n.err)
	}
}

// TestRemoteConfigSourceRefused: a raw resource subscribing through a
// config source render cannot turn into a file (here a cluster's load
// report server) is refused, naming the resource and the field.
func TestRemoteConfigSourceRefused(t *testing.T) {
	doc := `
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: raw
  type: STATIC
  lrs_server: { self: {} }
  load_assignment: { cluster_name: raw }
`
	_, err := Render(compiled(t, doc), opts(false))
	if err == nil || !strings.Contains(err.Error(), `Cluster "raw": lrs_server: a config source that reaches a management server (self)`) {
		t.Fatalf("got %v", err)
	}
}

// TestRewriteLeavesTheSnapshotAlone: the snapshot's messages are shared
// with every stream of a server; render rewrites copies.
func TestRewriteLeavesTheSnapshotAlone(t *testing.T) {
	snap := compiled(t, tlsConfig)
	before := proto.Clone(snap.Set(xdstype.ClusterURL).Get("cart").Message)
	if _, err := Render(snap, opts(true)); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before, snap.Set(xdstype.ClusterURL).Get("cart").Message) {
		t.Fatal("Render changed the snapshot's cluster")
	}
}

// ecdsConfig is a raw listener whose HTTP filter takes its config over
// ECDS, by the filter's name.
const ecdsConfig = `
resources:
- "@type": type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig
  name: lua
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
    default_source_code: { inline_string: "function envoy_on_request(h) end" }
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: raw
  address: { socket_address: { address: 0.0.0.0, port_value: 9000 } }
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: raw
        route_config: { name: local }
        http_filters:
        - name: lua
          config_discovery:
            config_source: { ads: {}, resource_api_version: V3 }
            type_urls: [type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua]
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
`

// TestExtensionConfigByFilterName: a filter's ECDS config source points at
// the file of the extension config named as the filter, which holds it.
func TestExtensionConfigByFilterName(t *testing.T) {
	files, err := Render(compiled(t, ecdsConfig), opts(false))
	if err != nil {
		t.Fatal(err)
	}
	var lds, ecds *File
	for i := range files {
		switch files[i].Name {
		case LDSFile:
			lds = &files[i]
		case "ecds-lua.yaml":
			ecds = &files[i]
		}
	}
	if lds == nil || ecds == nil {
		t.Fatalf("files %v", files)
	}
	if r := parse(t, *ecds); r.TypeUrl != xdstype.ExtensionConfURL || len(r.Resources) != 1 {
		t.Fatalf("ecds-lua.yaml: %v", r)
	}
	var refs []*corev3.ConfigSource
	sources(t, parse(t, *lds).ProtoReflect(), &refs)
	if len(refs) != 1 || refs[0].GetPathConfigSource().GetPath() != envoyDir+"/ecds-lua.yaml" {
		t.Fatalf("the listener's config sources: %v", refs)
	}
}

// TestUndeliverableTypesRefused: scoped routes cannot be fed through files
// (one config source for every route configuration they name); render
// says so, naming the resource, rather than write what Envoy rejects.
func TestUndeliverableTypesRefused(t *testing.T) {
	doc := `
resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: r1
- "@type": type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration
  name: scope-a
  route_configuration_name: r1
  key: { fragments: [{ string_key: a }] }
`
	_, err := Render(compiled(t, doc), opts(false))
	if err == nil || !strings.Contains(err.Error(), `ScopedRouteConfiguration "scope-a": cannot be delivered through files`) {
		t.Fatalf("got %v", err)
	}
}

// TestRuntimeLayers: a Runtime gets its file and a layer of the bootstrap
// reading it (Envoy subscribes to RTDS only from the bootstrap), and the
// admin layer stays.
func TestRuntimeLayers(t *testing.T) {
	doc := `
resources:
- "@type": type.googleapis.com/envoy.service.runtime.v3.Runtime
  name: flags
  layer: { health_check.min_interval: 10 }
`
	files, err := Render(compiled(t, doc), opts(false))
	if err != nil {
		t.Fatal(err)
	}
	var boot *File
	names := map[string]bool{}
	for i := range files {
		names[files[i].Name] = true
		if files[i].Name == BootstrapFile {
			boot = &files[i]
		}
	}
	if !names["rtds-flags.yaml"] || boot == nil {
		t.Fatalf("files %v", names)
	}
	js, err := yaml.YAMLToJSON(boot.Data)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		t.Fatal(err)
	}
	layers := b.GetLayeredRuntime().GetLayers()
	if len(layers) != 2 || layers[0].GetRtdsLayer().GetName() != "flags" ||
		layers[0].GetRtdsLayer().GetRtdsConfig().GetPathConfigSource().GetPath() != envoyDir+"/rtds-flags.yaml" || layers[1].GetAdminLayer() == nil {
		t.Fatalf("layers %v", layers)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
}

// TestNamesDifferingInCaseRefused: two resources whose files differ only
// in case would be one file on a case-insensitive filesystem, the second
// written over the first: refused, naming the file.
func TestNamesDifferingInCaseRefused(t *testing.T) {
	n := &names{dir: envoyDir, byFile: map[string]string{}}
	n.perName(edsURL, "Cart")
	if n.err != nil {
		t.Fatal(n.err)
	}
	n.perName(edsURL, "cart")
	if n.err == nil || !strings.Contains(n.err.Error(), "two resources map to the file eds-cart.yaml") {
		t.Fatalf("Cart and cart: %v, want a refusal naming the file", n.err)
	}
}

// TestRenderUsesTheOneRule: render refuses by redact.Inline, the
// rule the output gate and the dumps use, and names the field that holds
// the key, never the key.
func TestRenderUsesTheOneRule(t *testing.T) {
	_, err := Render(compiled(t, tlsConfig), opts(false))
	if err == nil || !strings.Contains(err.Error(), `Secret "edge-cert" holds private key material at tls_certificate.private_key.inline_`) {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("the error quotes the key: %v", err)
	}
}
