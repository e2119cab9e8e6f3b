package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

const (
	keyBody = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-MARKER-SECRET-0001"
	cert    = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n"
)

func pemBlock(kind string) string {
	return "-----BEGIN " + kind + "PRIVATE KEY-----\n" + keyBody + "\n-----END " + kind + "PRIVATE KEY-----\n"
}

func TestString(t *testing.T) {
	cases := []struct {
		name, in string
		keep     []string // must survive
	}{
		{"pkcs8", pemBlock(""), nil},
		{"rsa", "before " + pemBlock("RSA ") + " after", []string{"before ", " after"}},
		{"ec_encrypted", pemBlock("EC ") + pemBlock("ENCRYPTED "), nil},
		{"openssh", pemBlock("OPENSSH "), nil},
		{"certificate_stays", cert + pemBlock(""), []string{cert}},
		{"truncated", `invalid value "-----BEGIN PRIVATE KEY-----\n` + keyBody + `\nMIIEv" for field x`, []string{`invalid value "`, `" for field x`}},
		{"quoted_newlines", `"-----BEGIN PRIVATE KEY-----\n` + keyBody + `\n-----END PRIVATE KEY-----\n"`, nil},
		{"base64_of_pem", `{"inlineBytes":"` + base64.StdEncoding.EncodeToString([]byte(pemBlock(""))) + `"}`, []string{`{"inlineBytes":"`}},
		{"base64_cut_short", `bytes "` + base64.StdEncoding.EncodeToString([]byte(pemBlock("")))[:40] + `..."`, []string{`bytes "`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := String(c.in)
			if strings.Contains(out, "MARKER") || strings.Contains(out, "MIIEvQ") || strings.Contains(out, "LS0tLS1CRUdJTiBQUklW") {
				t.Fatalf("key material survived: %q", out)
			}
			if !strings.Contains(out, Redacted) {
				t.Fatalf("nothing says what was taken out: %q", out)
			}
			for _, k := range c.keep {
				if !strings.Contains(out, k) {
					t.Fatalf("%q lost %q: %q", c.in, k, out)
				}
			}
		})
	}
	for _, s := range []string{"", "plain text", cert, "PRIVATE KEY is mentioned but absent", base64.StdEncoding.EncodeToString([]byte(cert))} {
		if got := String(s); got != s {
			t.Errorf("String changed text without a key: %q -> %q", s, got)
		}
	}
}

func TestJSON(t *testing.T) {
	marker := "MARKER-JSON-7"
	cases := []struct {
		name, in string
		keep     []string
	}{
		{"protojson_camel", `{"name":"s","tlsCertificate":{"certificateChain":{"inlineString":"CERT"},"privateKey":{"inlineString":"` + marker + `"}}}`, []string{"CERT", `"name":"s"`}},
		{"proto_names", `{"tls_certificate":{"private_key":{"inline_bytes":"` + marker + `"},"password":{"inline_string":"` + marker + `"}}}`, nil},
		{"filename_stays", `{"tlsCertificate":{"privateKey":{"filename":"/etc/keys/web.key"}}}`, []string{"/etc/keys/web.key"}},
		{"ticket_keys", `{"sessionTicketKeys":{"keys":[{"inlineString":"` + marker + `"}]}}`, nil},
		{"generic_secret", `{"genericSecret":{"secret":{"inlineString":"` + marker + `"},"secrets":{"a":{"inlineBytes":"` + marker + `"}}}}`, nil},
		{"nested_any", `{"filterChains":[{"transportSocket":{"typedConfig":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext","commonTlsContext":{"tlsCertificates":[{"privateKey":{"inlineString":"` + marker + `"}}]}}}}]}`, []string{"DownstreamTlsContext"}},
		{"provider", `{"privateKeyProvider":{"providerName":"x","typedConfig":{"@type":"t","key":"` + marker + `"}}}`, []string{`"@type":"t"`}},
		{"pem_anywhere", `{"inlineCode":"` + strings.ReplaceAll(pemBlock(""), "\n", `\n`) + `"}`, nil},
		{"model_names_stay", `{"name":"web","tls":{"secret":"web-cert"},"key_file":"/k"}`, []string{"web-cert", "/k"}},
		{"not_json", `oops ` + pemBlock(""), []string{"oops"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := string(JSON([]byte(c.in)))
			if strings.Contains(out, "MARKER") {
				t.Fatalf("marker survived: %s", out)
			}
			for _, k := range c.keep {
				if !strings.Contains(out, k) {
					t.Fatalf("lost %q: %s", k, out)
				}
			}
		})
	}
	plain := `{"b":1, "a":"x"}`
	if got := string(JSON([]byte(plain))); got != plain {
		t.Fatalf("a body without secrets changed: %s", got)
	}
}
