package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
)

// TestOffsetKeyNotShownByGetOrDiff: a Secret whose certificate
// chain is a combined PEM (Bag Attributes, a certificate, then the key)
// as base64, the key not at a 3-byte boundary of it, is shown by neither
// `pylon get objects` (any format), `pylon history` nor `pylon diff`.
// (`pylon apply -f` refuses wrapped base64; the API takes it, and
// internal/admin's TestWrappedBase64KeyRedactedInHistory reads
// it back wrapped.)
func TestOffsetKeyNotShownByGetOrDiff(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	run := base64.StdEncoding.EncodeToString(der)[40:72]
	// The certificate and the key each start one byte past a 3-byte
	// boundary, as openssl's "Bag Attributes" lines leave them.
	prefix := "Bag Attributes\n    localKeyID: 01 00 00 00\n"
	for len(prefix)%3 != 1 {
		prefix += " "
	}
	cert := "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n  "
	prefix += cert[:len(cert)-len(cert)%3]
	b64, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(prefix + keyPEM)))

	d := startServe(t)
	doc := filepath.Join(t.TempDir(), "combined.json")
	writeFile(t, doc, `{"resources":[{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret","name":"combined","tlsCertificate":{"certificateChain":{"inlineBytes":`+string(b64)+`},"privateKey":{"filename":"/etc/keys/shop.key"}}}]}`)
	d.must(t, "apply", "-f", doc)
	for _, args := range [][]string{
		{"get", "objects"}, {"get", "objects", "-o", "yaml"}, {"get", "objects", "-o", "json"},
		{"history"}, {"diff", "1"}, {"diff", "1", "-o", "yaml"},
	} {
		out := d.must(t, args...)
		if strings.Contains(out, run) || strings.Contains(out, "PRIVATE KEY") || decodesToKey(out, run) {
			t.Errorf("pylon %v shows the key:\n%s", args, out)
		}
	}
}

// decodesToKey reports whether a word of out, base64-decoded, shows the
// key: its PEM header or its body's run.
func decodesToKey(out, run string) bool {
	for _, w := range strings.FieldsFunc(out, func(r rune) bool { return strings.ContainsRune(" \n\t\"',:", r) }) {
		d, err := base64.StdEncoding.DecodeString(w)
		if err == nil && (strings.Contains(string(d), "PRIVATE KEY") || strings.Contains(string(d), run)) {
			return true
		}
	}
	return false
}
