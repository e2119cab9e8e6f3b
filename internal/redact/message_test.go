package redact

import (
	"regexp"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/oauth2/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	// Every extension Pylon links in, so the registry walk sees them.
	_ "github.com/pylon-xds/pylon/internal/xdstype"
)

func inline(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dumpOf is what a dump shows: protojson with Any unpacked.
func dumpOf(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMessage(t *testing.T) {
	const marker = "MARKER-PROTO-42"
	tlsCert := func() *tlsv3.TlsCertificate {
		return &tlsv3.TlsCertificate{CertificateChain: inline(cert), PrivateKey: inline(marker), Password: inline(marker), Pkcs12: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(marker)}}}
	}
	downstream := &tlsv3.DownstreamTlsContext{
		CommonTlsContext:      &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{tlsCert()}},
		SessionTicketKeysType: &tlsv3.DownstreamTlsContext_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: []*corev3.DataSource{inline(marker), inline(marker)}}},
	}
	upstream := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
		PrivateKey:         &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/keys/up.key"}},
		PrivateKeyProvider: &tlsv3.PrivateKeyProvider{ProviderName: "cryptomb", ConfigType: &tlsv3.PrivateKeyProvider_TypedConfig{TypedConfig: mustAny(t, &tlsv3.GenericSecret{Secret: inline(marker)})}},
	}}}}
	cases := map[string]struct {
		in   proto.Message
		keep []string
	}{
		"secret_tls":                {&tlsv3.Secret{Name: "web", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: tlsCert()}}, []string{"CERTIFICATE", `"web"`}},
		"secret_generic":            {&tlsv3.Secret{Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{Secret: inline(marker), Secrets: map[string]*corev3.DataSource{"a": inline(marker)}}}}, nil},
		"secret_ticket_keys":        {&tlsv3.Secret{Type: &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{Keys: []*corev3.DataSource{inline(marker)}}}}, nil},
		"listener_inline_in_any":    {&listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, downstream)}}}}}, []string{"CERTIFICATE"}},
		"cluster_provider_and_file": {&clusterv3.Cluster{Name: "c", TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, upstream)}}}, []string{"/etc/keys/up.key", "cryptomb"}},
		"any_in_any":                {mustAny(t, mustAny(t, &tlsv3.Secret{Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: tlsCert()}})), nil},
		"pem_in_any_string":         {&corev3.HeaderValue{Key: "x", Value: pemBlock("")}, []string{`"x"`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := dumpOf(t, c.in)
			if !strings.Contains(before, "MARKER") {
				t.Fatalf("the case plants no marker: %s", before)
			}
			out := dumpOf(t, Message(c.in))
			if strings.Contains(out, "MARKER") {
				t.Fatalf("marker survived: %s", out)
			}
			for _, k := range c.keep {
				if !strings.Contains(out, k) {
					t.Fatalf("lost %q: %s", k, out)
				}
			}
			if dumpOf(t, c.in) != before {
				t.Fatal("Message changed its input")
			}
		})
	}
	if Message(nil) != nil {
		t.Fatal("nil in, something out")
	}
}

// keyBearing is this test's own idea of which fields hold key material,
// written independently of secretField so that a field the rule misses
// fails here: any field whose name speaks of a key, a password, a secret
// or a token and whose type can hold one.
var keyBearing = regexp.MustCompile(`(^|_)(private_key|password|passphrase|pkcs12|secret|secrets|token|json_key|api_key)$|^keys$`)

// notMaterial are fields the pattern catches that hold no key material.
var notMaterial = map[string]string{
	"envoy.extensions.filters.http.oauth2.v3.OAuth2Credentials.hmac_secret":  "an SDS reference by name",
	"envoy.extensions.filters.http.oauth2.v3.OAuth2Credentials.token_secret": "an SDS reference by name",
	"envoy.config.cluster.v3.Cluster.LbSubsetConfig.LbSubsetSelector.keys":   "metadata key names",
}

// TestEveryKeyFieldInTheRegistry plants a marker in every key-bearing
// field of every registered message type, wraps the message in an Any in
// a Cluster's transport socket, and checks the marker never survives.
func TestEveryKeyFieldInTheRegistry(t *testing.T) {
	const marker = "MARKER-REGISTRY"
	planted := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		fields := mt.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			full := string(mt.Descriptor().FullName()) + "." + string(fd.Name())
			if !keyBearing.MatchString(string(fd.Name())) || notMaterial[full] != "" {
				continue
			}
			m := mt.New()
			if !plant(m, fd, marker) {
				continue
			}
			planted++
			c := &clusterv3.Cluster{Name: "c", TransportSocket: &corev3.TransportSocket{Name: "x", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, m.Interface())}}}
			if out := dumpOf(t, Message(c)); strings.Contains(out, marker) {
				t.Errorf("%s: the marker survived: %s", full, out)
			}
		}
		return true
	})
	if planted < 15 {
		t.Fatalf("only %d key-bearing fields found: is the registry linked in?", planted)
	}
	t.Logf("%d key-bearing fields checked", planted)
}

// plant sets fd of m to marker when its type can hold one.
func plant(m protoreflect.Message, fd protoreflect.FieldDescriptor, marker string) bool {
	ds := func() protoreflect.Value { return protoreflect.ValueOfMessage(inline(marker).ProtoReflect()) }
	scalar := func(d protoreflect.FieldDescriptor) (protoreflect.Value, bool) {
		switch d.Kind() {
		case protoreflect.StringKind:
			return protoreflect.ValueOfString(marker), true
		case protoreflect.BytesKind:
			return protoreflect.ValueOfBytes([]byte(marker)), true
		case protoreflect.MessageKind:
			if d.Message().FullName() == dataSourceName {
				return ds(), true
			}
		}
		return protoreflect.Value{}, false
	}
	switch {
	case fd.IsMap():
		v, ok := scalar(fd.MapValue())
		if ok {
			m.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), v)
		}
		return ok
	case fd.IsList():
		v, ok := scalar(fd)
		if ok {
			m.Mutable(fd).List().Append(v)
		}
		return ok
	}
	v, ok := scalar(fd)
	if ok {
		m.Set(fd, v)
	}
	return ok
}
