package redact

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// realKey is a freshly made EC private key as PKCS#8 PEM and its DER.
func realKey(t testing.TB) (pemText string, der []byte) { return certstest.KeyPEM(t) }

// bodyMarker is a run of the key's PEM body: what must never survive.
func bodyMarker(der []byte) string { return base64.StdEncoding.EncodeToString(der)[40:72] }

// wrap breaks s into lines of width, the first one first chars long.
func wrap(s string, width, first int, sep string) string {
	var b strings.Builder
	for n := first; len(s) > 0; n = width {
		n = min(max(n, 1), len(s))
		b.WriteString(s[:n])
		s = s[n:]
		if len(s) > 0 {
			b.WriteString(sep)
		}
	}
	return b.String()
}

// TestWrappedBase64KeyRedacted: a key in inline_bytes is found
// whatever its base64 looks like: wrapped at any width, after a
// certificate (so the key does not start at a 3-byte boundary), in the
// URL alphabet, unpadded; the whole field goes, the key's body with it.
func TestWrappedBase64KeyRedacted(t *testing.T) {
	key, der := realKey(t)
	marker := bodyMarker(der)
	combined := cert + "x" + key // one byte more: the key's offset is not a multiple of 3
	std := base64.StdEncoding.EncodeToString([]byte(combined))
	cases := map[string]string{
		"aligned":         base64.StdEncoding.EncodeToString([]byte(key)),
		"bag_attributes":  base64.StdEncoding.EncodeToString([]byte("Bag Attributes\n    localKeyID: 01 00\n" + key)),
		"offset":          std,
		"wrapped_76":      wrap(std, 76, 76, "\n"),
		"wrapped_crlf_13": wrap(std, 13, 5, "\r\n"),
		"wrapped_spaces":  wrap(std, 64, 3, " "),
		"url_unpadded":    base64.RawURLEncoding.EncodeToString([]byte(combined)),
		"der":             base64.StdEncoding.EncodeToString(der),
		"der_wrapped":     wrap(base64.StdEncoding.EncodeToString(der), 10, 7, "\n"),
	}
	for name, b64 := range cases {
		t.Run(name, func(t *testing.T) {
			for _, field := range []string{"inlineBytes", "inline_bytes"} {
				in := `{"name":"l","filterChains":[{"transportSocket":{"typedConfig":{"commonTlsContext":{"tlsCertificates":[{"certificateChain":{"` + field + `":` + jsonQuote(b64) + `}}]}}}}]}`
				out := string(JSON([]byte(in)))
				if leaked(out, marker, der) {
					t.Fatalf("%s: the key survived: %s", field, out)
				}
				if !strings.Contains(out, Redacted) || !strings.Contains(out, `"name":"l"`) {
					t.Fatalf("%s: %s", field, out)
				}
			}
			// And as text anywhere (a quoted body, an error).
			if out := String("body: " + b64 + " end"); leaked(out, marker, der) {
				t.Fatalf("String: the key survived: %s", out)
			}
		})
	}
	// An inline_string holding the combined PEM goes whole too, and so
	// does its key wherever it sits in plain text.
	in := `{"certificateChain":{"inlineString":` + jsonQuote("garbage\n"+combined+"trailer") + `}}`
	if out := string(JSON([]byte(in))); leaked(out, marker, der) {
		t.Fatalf("inline_string: the key survived: %s", out)
	}
	// A certificate alone stays.
	c := `{"certificateChain":{"inlineBytes":"` + base64.StdEncoding.EncodeToString([]byte(cert)) + `"}}`
	if out := string(JSON([]byte(c))); out != c {
		t.Fatalf("a certificate changed: %s", out)
	}
}

// TestMessageDecodesEveryDataSource: the proto dump decodes an
// inline_bytes DataSource too: a combined PEM or a DER key held in a
// field that is not named as secret goes whole.
func TestMessageDecodesEveryDataSource(t *testing.T) {
	key, der := realKey(t)
	marker := bodyMarker(der)
	for name, content := range map[string][]byte{"combined": []byte(cert + key), "der": der} {
		m := &tlsv3.Secret{Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: content}},
		}}}
		if out := dumpOf(t, Message(m)); leaked(out, marker, der) || !strings.Contains(out, Redacted) {
			t.Fatalf("%s: %s", name, out)
		}
	}
}

// leaked reports whether out shows the key: its body's marker, in clear
// or base64-decoded at any offset, or its DER.
func leaked(out, marker string, der []byte) bool {
	if strings.Contains(out, marker) || strings.Contains(out, string(der[8:24])) {
		return true
	}
	clean := strings.NewReplacer("\n", "", "\r", "", " ", "", `\n`, "", `\r`, "").Replace(out)
	for off := range 4 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			src := []byte(clean[off:])
			dst := make([]byte, enc.DecodedLen(len(src)))
			// Decode up to the first non-base64 byte, repeatedly.
			for len(src) > 0 {
				n, err := enc.Decode(dst, src)
				if strings.Contains(string(dst[:n]), marker) || strings.Contains(string(dst[:n]), string(der[8:24])) {
					return true
				}
				if err == nil {
					break
				}
				i := int(err.(base64.CorruptInputError))
				src = src[min(len(src), i/4*4+4):]
			}
		}
	}
	return false
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// jwks is a JWKS with a symmetric key and an RSA private key.
const jwks = `{"keys":[{"kty":"oct","kid":"hs","k":"MARKER-JWKS-K"},{"kty":"RSA","kid":"rs","n":"PUBLIC-N","e":"AQAB","d":"MARKER-JWKS-D","p":"MARKER-JWKS-P","q":"MARKER-JWKS-Q","dp":"MARKER-JWKS-DP","dq":"MARKER-JWKS-DQ","qi":"MARKER-JWKS-QI"}]}`

func jwtFilter(t *testing.T, local *corev3.DataSource) *listenerv3.Listener {
	cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{"p": {
		Issuer:              "https://issuer",
		JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: local},
	}}}
	return &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: "jwt", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, cfg)},
	}}}}}
}

// TestJWKSPrivateMembersRedacted: a JWKS inline in jwt_authn's
// local_jwks loses its private members and symmetric keys in every dump,
// proto or stored JSON, and keeps its public ones.
func TestJWKSPrivateMembersRedacted(t *testing.T) {
	for name, ds := range map[string]*corev3.DataSource{
		"string": {Specifier: &corev3.DataSource_InlineString{InlineString: jwks}},
		"bytes":  {Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(jwks)}},
	} {
		m := jwtFilter(t, ds)
		out := dumpOf(t, Message(m))
		if strings.Contains(out, "MARKER") || !strings.Contains(out, "PUBLIC-N") && name == "string" {
			t.Fatalf("Message, %s: %s", name, out)
		}
		stored := JSON([]byte(dumpOf(t, m)))
		if strings.Contains(string(stored), "MARKER") || leaksBase64(string(stored)) {
			t.Fatalf("JSON, %s: %s", name, stored)
		}
	}
	public := `{"keys":[{"kty":"RSA","kid":"rs","n":"PUBLIC-N","e":"AQAB"}]}`
	m := jwtFilter(t, &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: public}})
	if len(Inline(m)) != 0 || !strings.Contains(dumpOf(t, Message(m)), "PUBLIC-N") {
		t.Fatalf("a public JWKS is no key material: %v", Inline(m))
	}
}

// leaksBase64 reports whether a JSON body holds the JWKS marker in a
// base64 string.
func leaksBase64(body string) bool {
	var v any
	_ = json.Unmarshal([]byte(body), &v)
	found := false
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if d, err := base64.StdEncoding.DecodeString(x); err == nil && strings.Contains(string(d), "MARKER") {
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

// TestInlineNamesTheField: Inline finds key material outside a
// Secret by its field path, and never quotes it.
func TestInlineNamesTheField(t *testing.T) {
	key, _ := realKey(t)
	down := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
		CertificateChain: inline(cert),
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(key)}},
	}}}}
	l := &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, down)}}}}}
	got := Inline(l)
	want := "filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key.inline_bytes"
	if len(got) != 1 || got[0].Field != want || got[0].What != "private key material" || !strings.Contains(got[0].Remedy, "sds_config") {
		t.Fatalf("Inline = %+v, want one finding at %s", got, want)
	}
	jw := Inline(jwtFilter(t, inline(jwks)))
	if len(jw) != 1 || jw[0].Field != "filter_chains[0].filters[0].typed_config.providers[p].local_jwks.inline_string" || !strings.Contains(jw[0].Remedy, "local_jwks.filename") {
		t.Fatalf("JWKS: %+v", jw)
	}
	// A file name is where a key is, not what it is.
	down.CommonTlsContext.TlsCertificates[0].PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/k.pem"}}
	l.FilterChains[0].TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, down)}
	if got := Inline(l); len(got) != 0 {
		t.Fatalf("a filename is no key material: %+v", got)
	}
}

// TestFinderAgreesWithInline: the Finder's shortcut (types that cannot
// hold key material left out when the encoding shows no key text) finds
// what the full walk finds: every key-bearing field of the registry, a
// PEM key in a plain string, a DER key in bytes, a wrapped base64 key.
func TestFinderAgreesWithInline(t *testing.T) {
	key, der := realKey(t)
	var msgs []proto.Message
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		fields := mt.Descriptor().Fields()
		for i := range fields.Len() {
			m := mt.New()
			if fd := fields.Get(i); keyBearing.MatchString(string(fd.Name())) && plant(m, fd, "MARKER-FINDER") {
				msgs = append(msgs, &clusterv3.Cluster{Name: "c", TransportSocket: &corev3.TransportSocket{Name: "x", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, m.Interface())}}})
			}
		}
		return true
	})
	msgs = append(msgs,
		&corev3.HeaderValue{Key: "x", Value: "a " + key},
		&corev3.HeaderValue{Key: "x", Value: wrap(base64.StdEncoding.EncodeToString([]byte("xx"+key)), 9, 4, "\n")},
		&corev3.HeaderValue{Key: "x", Value: "der " + base64.StdEncoding.EncodeToString(der)},
		&corev3.HeaderValue{Key: "x", Value: "plain"},
		&corev3.TypedExtensionConfig{Name: "b", TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/unknown.Type", Value: der}},
		// A type inside itself (a Permission's and_rules), met before the
		// outer one is worked out: the credential deep inside is found.
		&rbacv3.Policy{Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{{
			Rule: &rbacv3.Permission_Matcher{Matcher: &corev3.TypedExtensionConfig{Name: "m", TypedConfig: mustAny(t, &corev3.GrpcService{
				TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "x", StatPrefix: "x",
					CallCredentials: []*corev3.GrpcService_GoogleGrpc_CallCredentials{{CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_CallCredentials_AccessToken{AccessToken: "MARKER-RBAC"}}}}}})}},
		}}}}}}},
	)
	for _, m := range msgs {
		enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		full, quick := Inline(m), (&Finder{}).Inline(m, enc)
		if len(full) != len(quick) || len(full) > 0 && full[0] != quick[0] {
			t.Errorf("%s: Inline %+v, Finder %+v", dumpOf(t, m), full, quick)
		}
	}
	if len(msgs) < 20 {
		t.Fatalf("only %d messages", len(msgs))
	}
}
