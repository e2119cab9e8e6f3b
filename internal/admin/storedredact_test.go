package admin

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// wrapB64 breaks base64 into lines of width, the first one first long,
// as a PEM file's or a mail client's wrapping would.
func wrapB64(s string, width, first int) string {
	var b strings.Builder
	for n := first; len(s) > 0; n = width {
		n = min(n, len(s))
		b.WriteString(s[:n])
		if s = s[n:]; len(s) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// realKeyPEM is a fresh EC key as PKCS#8 PEM, and a run of its body that
// must never be shown.
func realKeyPEM(t *testing.T) (string, string) {
	keyPEM, der := certstest.KeyPEM(t)
	return keyPEM, base64.StdEncoding.EncodeToString(der)[40:72]
}

// showsKey reports whether a response shows the key's body: in clear, or
// in base64 from any offset, however wrapped.
func showsKey(body, bodyRun, keyPEM string) bool {
	if strings.Contains(body, bodyRun) {
		return true
	}
	clean := strings.NewReplacer("\n", "", `\n`, "", " ", "", "+ ", "", "\n+", "", "\n-", "").Replace(body)
	for off := range 4 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			src := []byte(clean[off:])
			for len(src) > 0 {
				dst := make([]byte, enc.DecodedLen(len(src)))
				n, err := enc.Decode(dst, src)
				if strings.Contains(string(dst[:n]), bodyRun) || strings.Contains(string(dst[:n]), "PRIVATE KEY") {
					return true
				}
				ce, ok := err.(base64.CorruptInputError)
				if !ok {
					break
				}
				src = src[min(len(src), int(ce)/4*4+4):]
			}
		}
	}
	return false
}

// TestWrappedBase64KeyRedactedInHistory: a Secret whose
// certificate chain is a combined PEM file (openssl's "Bag Attributes"
// lines, the certificate, then the key: the key's base64 does not start
// at a 3-byte boundary of the encoded text), its base64 wrapped at 64
// columns, is accepted (a Secret may hold keys) and never shown, on any
// read: the objects, one object, the history entry, the diff as JSON
// (the dashboard's Changes page reads these) and as a bare diff (what
// pylon diff prints).
func TestWrappedBase64KeyRedactedInHistory(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	keyPEM, run := realKeyPEM(t)
	combined := "Bag Attributes\n    localKeyID: 01 00 00 00\n" + strings.ReplaceAll(cert, "\\n", "\n") + keyPEM
	b64 := wrapB64(base64.StdEncoding.EncodeToString([]byte(combined)), 64, 61)
	doc := `{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"w","tlsCertificate":{"certificateChain":{"inlineBytes":` + jsonString(b64) + `},"privateKey":{"filename":"/etc/keys/w.key"}}}]}`
	// A first revision without the Secret, for the diff from it.
	first := `{"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"first","connect_timeout":"1s"}]}`
	for _, d := range []string{first, doc} {
		if code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(d)); code != http.StatusOK {
			t.Fatalf("apply: %d %s", code, body)
		}
	}
	for _, path := range []string{"/v1/objects", "/v1/objects/resources.Secret/w", "/v1/history/2", "/v1/diff?from=1", "/v1/diff?from=1&format=diff"} {
		code, body := h.do(t, "GET", path, writeTok, nil)
		if code != http.StatusOK || showsKey(body, run, keyPEM) {
			t.Errorf("%s: %d shows the key: %.900s", path, code, body)
		}
		if !strings.Contains(body, "/etc/keys/w.key") {
			t.Errorf("%s: the key's file name is where it is, not what it is, and stays: %.600s", path, body)
		}
	}
}

// cert is a certificate as the tests write it.
const cert = "-----BEGIN CERTIFICATE-----\\nMIIBszCCAVmgAwIBAgIUQ\\n-----END CERTIFICATE-----\\n"

// TestInlineKeyRefusedByTheAPI: a write holding a key inline in
// a Listener or a Cluster is refused (the output gate's rule), the
// diagnostic naming the object and the field and saying to use SDS,
// never quoting the key; nothing is stored.
func TestInlineKeyRefusedByTheAPI(t *testing.T) {
	h := newHarness(t, Options{Token: writeTok}, nil)
	var objs []string
	for _, c := range inlineKeyObjects() {
		objs = append(objs, string(c.Body))
	}
	code, body := h.do(t, "POST", "/v1/apply", writeTok, []byte(`{"resources":[`+strings.Join(objs, ",")+`]}`))
	if code != http.StatusBadRequest || leaks(body) {
		t.Fatalf("apply: %d %.900s", code, body)
	}
	for _, want := range []string{
		"filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key.inline_bytes",
		"transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key.inline_string",
		"private key material inline in a Listener is served to every client of its group, with or without a certificate: put it in a Secret and reference it with SDS (sds_config), or give Envoy a file (filename)",
		`"name": "c"`, `"name": "l"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the refusal does not say %q: %.900s", want, body)
		}
	}
	if code, body := h.do(t, "GET", "/v1/objects", writeTok, nil); code != http.StatusOK || strings.Contains(body, "resources.Listener") {
		t.Fatalf("a refused write was stored: %d %s", code, body)
	}
}
