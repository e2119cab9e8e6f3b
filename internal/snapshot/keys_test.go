package snapshot_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pylon-xds/pylon/internal/diag"
	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

func pemKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func packed(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tlsCert(key *corev3.DataSource) []*tlsv3.TlsCertificate {
	return []*tlsv3.TlsCertificate{{CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/c.pem"}}, PrivateKey: key}}
}

func tlsListener(t *testing.T, key *corev3.DataSource) *listenerv3.Listener {
	down := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: tlsCert(key)}}
	return &listenerv3.Listener{
		Name:    "l",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8443}}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters:         []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: packed(t, hcm(t))}}},
			TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed(t, down)}},
		}},
	}
}

// hcm is an HTTP connection manager with the given HTTP filters before
// its router and an inline route configuration.
func hcm(t *testing.T, filters ...*hcmv3.HttpFilter) *hcmv3.HttpConnectionManager {
	filters = append(filters, &hcmv3.HttpFilter{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: packed(t, &routerv3.Router{})}})
	return &hcmv3.HttpConnectionManager{StatPrefix: "in", HttpFilters: filters, RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{}}
}

func tlsCluster(t *testing.T, key *corev3.DataSource) *clusterv3.Cluster {
	up := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: tlsCert(key)}}
	c := cluster("c", time.Second)
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed(t, up)}}
	return c
}

func filterListener(t *testing.T, f *hcmv3.HttpFilter) *listenerv3.Listener {
	l := tlsListener(t, &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/k.pem"}})
	l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: packed(t, hcm(t, f))}
	return l
}

func jwtFilter(t *testing.T, jwks string) *hcmv3.HttpFilter {
	cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{"p": {
		Issuer:              "https://issuer",
		JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: jwks}}},
	}}}
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.jwt_authn", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: packed(t, cfg)}}
}

func extAuthzFilter(t *testing.T, key string) *hcmv3.HttpFilter {
	cfg := &extauthzv3.ExtAuthz{Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
			TargetUri: "authz:443", StatPrefix: "authz",
			ChannelCredentials: &corev3.GrpcService_GoogleGrpc_ChannelCredentials{CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelCredentials_SslCredentials{SslCredentials: &corev3.GrpcService_GoogleGrpc_SslCredentials{
				PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: key}},
			}}},
			CallCredentials: []*corev3.GrpcService_GoogleGrpc_CallCredentials{{CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_CallCredentials_AccessToken{AccessToken: "MARKER-TOKEN"}}},
		}},
		Timeout: durationpb.New(time.Second),
	}}}
	return &hcmv3.HttpFilter{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: packed(t, cfg)}}
}

const dataSourceAdvice = "private key material inline in a %s is served to every client of its group, with or without a certificate: put it in a Secret and reference it with SDS (sds_config), or give Envoy a file (filename)"

// TestInlineKeyRefusedAtOutputGate: key material outside a
// Secret (a TLS context's private key in a Listener or a Cluster, a
// gRPC service's SSL key and token in a filter, a JWKS's private
// members) is refused by the output gate every resource passes, naming
// the field and saying what to do instead, never quoting the key. A
// Secret holds keys; a file name and a public JWKS are no key material.
func TestInlineKeyRefusedAtOutputGate(t *testing.T) {
	key := pemKey(t)
	bytesKey := &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(key)}}
	strKey := &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: key}}
	tlsPath := "common_tls_context.tls_certificates[0].private_key."
	authz := "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.grpc_service.google_grpc."
	jwks := `{"keys":[{"kty":"oct","k":"MARKER-K"},{"kty":"EC","crv":"P-256","x":"X","y":"Y","d":"MARKER-D"}]}`
	cases := map[string]struct {
		m    proto.Message
		want []diag.Diagnostic
	}{
		"listener": {tlsListener(t, bytesKey), []diag.Diagnostic{{File: "a.yaml", Line: 1, Type: "Listener", Name: "l", Field: "filter_chains[0].transport_socket.typed_config." + tlsPath + "inline_bytes", Message: strings.ReplaceAll(dataSourceAdvice, "%s", "Listener")}}},
		"cluster":  {tlsCluster(t, strKey), []diag.Diagnostic{{File: "a.yaml", Line: 1, Type: "Cluster", Name: "c", Field: "transport_socket.typed_config." + tlsPath + "inline_string", Message: strings.ReplaceAll(dataSourceAdvice, "%s", "Cluster")}}},
		"grpc_service": {filterListener(t, extAuthzFilter(t, key)), []diag.Diagnostic{
			{File: "a.yaml", Line: 1, Type: "Listener", Name: "l", Field: authz + "channel_credentials.ssl_credentials.private_key.inline_string", Message: strings.ReplaceAll(dataSourceAdvice, "%s", "Listener")},
			{File: "a.yaml", Line: 1, Type: "Listener", Name: "l", Field: authz + "call_credentials[0].access_token", Message: "a credential inline in a Listener is served to every client of its group, with or without a certificate: give Envoy a credential it reads from a file or a Secret instead"},
		}},
		"jwks": {filterListener(t, jwtFilter(t, jwks)), []diag.Diagnostic{{File: "a.yaml", Line: 1, Type: "Listener", Name: "l", Field: "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.providers[p].local_jwks.inline_string", Message: "a JWKS private key inline in a Listener is served to every client of its group, with or without a certificate: give Envoy the JWKS as a file (local_jwks.filename) or fetch it (remote_jwks)"}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := refused(t, c.m)
			wantDiags(t, got, c.want...)
			if s := got.Error(); strings.Contains(s, "MARKER") || strings.Contains(s, key[40:80]) {
				t.Fatalf("the diagnostic quotes the key: %s", s)
			}
		})
	}
	// What is allowed.
	reg := xdstype.New()
	secret := &tlsv3.Secret{Name: "s", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: tlsCert(strKey)[0]}}
	public := `{"keys":[{"kty":"EC","crv":"P-256","x":"X","y":"Y"}]}`
	file := &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/k.pem"}}
	env := &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "KEY"}}
	for name, m := range map[string]proto.Message{"secret": secret, "filename": tlsListener(t, file), "env": tlsCluster(t, env), "public_jwks": filterListener(t, jwtFilter(t, public))} {
		if _, err := snapshot.Build(reg, typedInputs(t, reg, m)); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}
