// Package bootstrap writes the bootstrap configuration that points a data
// plane at Pylon: Envoy's bootstrap (YAML) and the JSON bootstrap of
// proxyless gRPC clients.
package bootstrap

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// Options describes the node and the server it talks to.
type Options struct {
	NodeID      string
	NodeCluster string
	// XDSAddress is Pylon's xDS address as the data plane reaches it
	// (host:port).
	XDSAddress string
	// Delta selects incremental xDS (DELTA_GRPC) for Envoy.
	Delta bool
	// AdminPort is Envoy's admin port, bound on 127.0.0.1.
	AdminPort uint32
	// TLS, if set, secures the connection to Pylon with mutual TLS.
	TLS *TLS
	// Locality is node.locality, which node groups match exactly.
	Locality Locality
	// Metadata are node.metadata's string values, which node groups match.
	Metadata map[string]string
	// Server makes a gRPC bootstrap an xDS-enabled server's (gRFC A36):
	// it names the Listener the server fetches for its address.
	Server bool
	// CertDir, for gRPC, holds the certificates of the certificate
	// provider instance "default" (gRFC A29), which a server's and its
	// clients' TLS from xDS use: tls.crt and tls.key (the node's own),
	// ca.crt (the CA that verifies its peers).
	CertDir string
}

// Locality is where the node runs (node.locality); empty fields are unset.
type Locality struct {
	Region, Zone, SubZone string
}

func (l Locality) empty() bool { return l == Locality{} }

// Bounds on what a bootstrap may claim about its node: Pylon logs and lists
// these values, so it refuses longer ones from a client, and a bootstrap
// that it would refuse is better refused here.
const (
	maxNodeField = 1024
	maxMetadata  = 64
	// maxMetadataBytes is the xDS server's bound on the metadata's string
	// keys and values together.
	maxMetadataBytes = 16 << 10
)

// ParseLocality reads "region[/zone[/sub_zone]]", as --locality takes it.
// A field may be left empty ("/zone-a" has no region), but not all of them.
func ParseLocality(s string) (Locality, error) {
	parts := strings.Split(s, "/")
	if len(parts) > 3 {
		return Locality{}, fmt.Errorf("locality %q: want region[/zone[/sub_zone]], got %d fields", s, len(parts))
	}
	parts = append(parts, "", "")
	l := Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}
	if l.empty() {
		return Locality{}, fmt.Errorf("locality %q: want region[/zone[/sub_zone]], got no field", s)
	}
	return l, nil
}

// ParseMetadata reads "key=value" pairs, as --metadata takes them (the
// value may itself contain "="). A key given twice is an error: one of the
// two would be silently lost.
func ParseMetadata(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("metadata %q: want key=value", shorten(p))
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("metadata %q: key %q given twice", shorten(p), shorten(k))
		}
		m[k] = v
	}
	return m, nil
}

// checkNode refuses node fields that Pylon would refuse from the client or
// that cannot be written as JSON strings unchanged.
func (o Options) checkNode() error {
	if len(o.Metadata) > maxMetadata {
		return fmt.Errorf("node metadata: %d keys; at most %d", len(o.Metadata), maxMetadata)
	}
	fields := []struct{ name, v string }{
		{"id", o.NodeID}, {"cluster", o.NodeCluster},
		{"locality.region", o.Locality.Region}, {"locality.zone", o.Locality.Zone}, {"locality.sub_zone", o.Locality.SubZone},
	}
	size := 0
	for k, v := range o.Metadata {
		if k == "" {
			return fmt.Errorf("node metadata: an empty key")
		}
		size += len(k) + len(v)
		name := fmt.Sprintf("metadata[%q]", shorten(k))
		fields = append(fields, struct{ name, v string }{name + " key", k}, struct{ name, v string }{name, v})
	}
	for _, f := range fields {
		switch {
		case len(f.v) > maxNodeField:
			return fmt.Errorf("node %s: %d bytes; at most %d", f.name, len(f.v), maxNodeField)
		case !utf8.ValidString(f.v):
			return fmt.Errorf("node %s: not valid UTF-8", f.name)
		}
	}
	// After the fields: a value too long on its own is named.
	if size > maxMetadataBytes {
		return fmt.Errorf("node metadata: %d bytes of keys and values; at most %d", size, maxMetadataBytes)
	}
	return nil
}

// shorten keeps an error message short whatever the input.
func shorten(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// TLS is how a data plane connects to Pylon over mutual TLS: the files it
// reads, not their contents, so that the bootstrap holds no key and the
// files can rotate.
type TLS struct {
	// CAFile verifies Pylon's certificate.
	CAFile string
	// CertFile and KeyFile are the node's client certificate and key, which
	// Pylon binds to the node's id (--node-identity).
	CertFile, KeyFile string
	// ServerName is the name Envoy sends as SNI and expects in Pylon's
	// certificate (default: the host of XDSAddress). gRPC always verifies
	// the host of XDSAddress.
	ServerName string
	// RefreshInterval is how often gRPC re-reads the files (default 1m).
	RefreshInterval time.Duration
}

func (t *TLS) check() error {
	switch {
	case t.CAFile == "":
		return fmt.Errorf("TLS: a CA file to verify Pylon is required (--ca-file)")
	case (t.CertFile == "") != (t.KeyFile == ""):
		return fmt.Errorf("TLS: a client certificate needs both --cert-file and --key-file")
	case t.RefreshInterval < 0:
		return fmt.Errorf("TLS: refresh interval %s is negative", t.RefreshInterval)
	}
	return nil
}

const xdsCluster = "xds_cluster"

func (o Options) hostPort() (string, uint32, error) {
	host, port, err := net.SplitHostPort(o.XDSAddress)
	if err != nil {
		return "", 0, fmt.Errorf("xds address %q: %w", o.XDSAddress, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("xds address %q: bad port", o.XDSAddress)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, uint32(p), nil
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// Envoy returns an Envoy bootstrap that takes clusters and listeners from
// Pylon over ADS. It passes Envoy's proto validation.
func Envoy(o Options) (*bootstrapv3.Bootstrap, error) {
	if o.NodeID == "" {
		return nil, fmt.Errorf("a node id is required")
	}
	node, err := o.envoyNode()
	if err != nil {
		return nil, err
	}
	host, port, err := o.hostPort()
	if err != nil {
		return nil, err
	}
	apiType := corev3.ApiConfigSource_GRPC
	if o.Delta {
		apiType = corev3.ApiConfigSource_DELTA_GRPC
	}
	adminPort := o.AdminPort
	if adminPort == 0 {
		adminPort = 9901
	}
	xds, err := o.xdsCluster(host, port)
	if err != nil {
		return nil, err
	}
	return &bootstrapv3.Bootstrap{
		Node: node,
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   apiType,
				TransportApiVersion:       corev3.ApiVersion_V3,
				SetNodeOnFirstMessageOnly: true,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsCluster}},
				}},
			},
			CdsConfig: ads(),
			LdsConfig: ads(),
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{xds},
		},
		Admin: &bootstrapv3.Admin{Address: socketAddress("127.0.0.1", adminPort)},
	}, nil
}

// xdsCluster is the bootstrap's static cluster that reaches Pylon at
// host:port: HTTP/2 with keepalives, TLS when o.TLS says so.
func (o Options) xdsCluster(host string, port uint32) (*clusterv3.Cluster, error) {
	// xDS is gRPC, so HTTP/2; keepalive pings find a dead control plane
	// connection long before TCP would.
	h2, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{
				ConnectionKeepalive: &corev3.KeepaliveSettings{
					Interval: durationpb.New(30 * time.Second),
					Timeout:  durationpb.New(5 * time.Second),
				},
			}},
		}},
	})
	if err != nil {
		return nil, err
	}
	discovery := clusterv3.Cluster_STRICT_DNS
	if net.ParseIP(host) != nil {
		discovery = clusterv3.Cluster_STATIC
	}
	var transport *corev3.TransportSocket
	if o.TLS != nil {
		if transport, err = upstreamTLS(o.TLS, host); err != nil {
			return nil, err
		}
	}
	return &clusterv3.Cluster{
		Name:                 xdsCluster,
		ConnectTimeout:       durationpb.New(5 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: discovery},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": h2,
		},
		UpstreamConnectionOptions: &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{}},
		TransportSocket:           transport,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: xdsCluster,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: socketAddress(host, port),
					}},
				}},
			}},
		},
	}, nil
}

// envoyNode is the bootstrap's node: id, cluster, and the locality and
// metadata when given.
func (o Options) envoyNode() (*corev3.Node, error) {
	if err := o.checkNode(); err != nil {
		return nil, err
	}
	n := &corev3.Node{Id: o.NodeID, Cluster: o.NodeCluster}
	if !o.Locality.empty() {
		n.Locality = &corev3.Locality{Region: o.Locality.Region, Zone: o.Locality.Zone, SubZone: o.Locality.SubZone}
	}
	if len(o.Metadata) > 0 {
		fields := make(map[string]*structpb.Value, len(o.Metadata))
		for k, v := range o.Metadata {
			fields[k] = structpb.NewStringValue(v)
		}
		n.Metadata = &structpb.Struct{Fields: fields}
	}
	return n, nil
}

// upstreamTLS is the xds_cluster's TLS: Pylon's certificate verified
// against the CA and its name (Envoy checks only the chain unless told which
// name to expect), the node's certificate presented from files.
func upstreamTLS(t *TLS, host string) (*corev3.TransportSocket, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	name := t.ServerName
	if name == "" {
		name = host
	}
	san := &tlsv3.SubjectAltNameMatcher{
		SanType: tlsv3.SubjectAltNameMatcher_DNS,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: name}},
	}
	sni := name
	if net.ParseIP(name) != nil {
		// An IP address is never sent as SNI (RFC 6066); it is checked
		// against the certificate's IP SANs.
		san.SanType, sni = tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""
	}
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2},
		// gRPC needs HTTP/2, negotiated by ALPN.
		AlpnProtocols: []string{"h2"},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa:                 file(t.CAFile),
			MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
		}},
	}
	if t.CertFile != "" {
		common.TlsCertificates = []*tlsv3.TlsCertificate{{CertificateChain: file(t.CertFile), PrivateKey: file(t.KeyFile)}}
	}
	ctx, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: common})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

func file(path string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// EnvoyYAML is Envoy's bootstrap as YAML, with proto field names.
func EnvoyYAML(o Options) ([]byte, error) {
	b, err := Envoy(o)
	if err != nil {
		return nil, err
	}
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
}

// grpcBootstrap is the JSON bootstrap grpc-go, grpc-java, C-core (and its
// wrappers: Python, C++, Ruby, PHP) and grpc-js read from GRPC_XDS_BOOTSTRAP
// (gRFC A27). What each requires, beyond A27's xds_servers and node.id:
//   - grpc-js-xds refuses a node without a "locality" object ("locality field
//     missing in node element"), so it is always written, empty if need be;
//     the others take it as optional.
//   - channel_creds is a list (all four). The "tls" type (gRFC A65) is read
//     by grpc-go and grpc-java, but not by grpc-js 1.14 (only "insecure" and
//     "google_default") nor by the C-core of Debian 12's grpcio 1.51 ("no
//     known creds type found"): those cannot use a TLS bootstrap. A
//     second, "insecure" entry would make them connect in plaintext, a
//     silent downgrade, so there is none and they refuse it.
//   - node.metadata is a JSON object (a google.protobuf.Struct); Pylon's
//     groups match its string values.
type grpcBootstrap struct {
	XDSServers []grpcServer `json:"xds_servers"`
	Node       grpcNode     `json:"node"`
	// ServerListenerTemplate names an xDS-enabled server's Listener:
	// %s is the address it serves on (host:port).
	ServerListenerTemplate string                  `json:"server_listener_resource_name_template,omitempty"`
	CertificateProviders   map[string]certProvider `json:"certificate_providers,omitempty"`
}

// ServerListenerTemplate is the name of the Listener an xDS-enabled gRPC
// server fetches, %s its address: grpc-go's and C-core's default, which
// translate.GRPCServerListenerName writes.
const ServerListenerTemplate = "grpc/server?xds.resource.listening_address=%s"

// CertProviderInstance is the certificate provider instance CertDir
// fills, the one the model's TLS for proxyless gRPC names by default.
const CertProviderInstance = "default"

// The files CertDir holds, named as in a Kubernetes TLS secret.
const (
	CertDirCert = "tls.crt"
	CertDirKey  = "tls.key"
	CertDirCA   = "ca.crt"
)

// certProvider is a certificate provider instance: gRPC's file_watcher
// plugin re-reads the files every refresh_interval.
type certProvider struct {
	PluginName string            `json:"plugin_name"`
	Config     map[string]string `json:"config"`
}

type grpcServer struct {
	ServerURI      string           `json:"server_uri"`
	ChannelCreds   []map[string]any `json:"channel_creds"`
	ServerFeatures []string         `json:"server_features"`
}

type grpcNode struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster,omitempty"`
	// Locality has no omitempty: grpc-js needs the object, even empty.
	Locality grpcLocality      `json:"locality"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

type grpcLocality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// GRPC is the JSON bootstrap of a proxyless gRPC client: plaintext, or with
// TLS the "tls" channel credentials, whose files gRPC re-reads
// (the file_watcher certificate provider, gRFC A65).
func GRPC(o Options) ([]byte, error) {
	if o.NodeID == "" {
		return nil, fmt.Errorf("a node id is required")
	}
	if err := o.checkNode(); err != nil {
		return nil, err
	}
	host, port, err := o.hostPort()
	if err != nil {
		return nil, err
	}
	creds := map[string]any{"type": "insecure"}
	if o.TLS != nil {
		if creds, err = grpcTLS(o.TLS, host); err != nil {
			return nil, err
		}
	}
	b := grpcBootstrap{
		XDSServers: []grpcServer{{
			ServerURI:    net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10)),
			ChannelCreds: []map[string]any{creds},
			// xds_v3 is what clients older than the v3-only ones need to
			// speak v3; newer clients ignore it.
			ServerFeatures: []string{"xds_v3"},
		}},
		Node: grpcNode{
			ID: o.NodeID, Cluster: o.NodeCluster, Metadata: o.Metadata,
			Locality: grpcLocality{Region: o.Locality.Region, Zone: o.Locality.Zone, SubZone: o.Locality.SubZone},
		},
	}
	if o.Server {
		b.ServerListenerTemplate = ServerListenerTemplate
	}
	if o.CertDir != "" {
		b.CertificateProviders = map[string]certProvider{CertProviderInstance: {PluginName: "file_watcher", Config: map[string]string{
			"certificate_file":    filepath.Join(o.CertDir, CertDirCert),
			"private_key_file":    filepath.Join(o.CertDir, CertDirKey),
			"ca_certificate_file": filepath.Join(o.CertDir, CertDirCA),
			"refresh_interval":    "60s",
		}}}
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// grpcTLS is the channel credentials entry of a TLS connection to Pylon.
func grpcTLS(t *TLS, host string) (map[string]any, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.ServerName != "" && t.ServerName != host {
		// gRPC's xDS TLS credentials cannot override the name verified.
		return nil, fmt.Errorf("TLS: gRPC verifies Pylon's certificate against the host of the xds address (%q); put %q in --xds-address instead of --server-name", host, t.ServerName)
	}
	refresh := t.RefreshInterval
	if refresh == 0 {
		refresh = time.Minute
	}
	cfg := map[string]any{
		"ca_certificate_file": t.CAFile,
		// A protobuf Duration in JSON: seconds with an "s".
		"refresh_interval": strconv.FormatFloat(refresh.Seconds(), 'f', -1, 64) + "s",
	}
	if t.CertFile != "" {
		cfg["certificate_file"], cfg["private_key_file"] = t.CertFile, t.KeyFile
	}
	return map[string]any{"type": "tls", "config": cfg}, nil
}
