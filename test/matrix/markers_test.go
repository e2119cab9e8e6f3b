package matrix

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/certs/certstest"
)

// A marker is a real private key planted in the config: its PEM body,
// its private scalar and every encoding of them this test can think of
// are searched for in everything Pylon sends or shows.
type marker struct {
	name    string // restricted, doomed, inline, jwks, wrapped
	finding string // the issue 30 finding a leak of it points to
	certPEM string
	keyPEM  string
	d       []byte // the private scalar
	needles []string
}

// newMarker issues a fresh certificate and key from ca.
func newMarker(t *testing.T, ca *certstest.CA, name, finding string) *marker {
	t.Helper()
	p := ca.Issue(t, certstest.Server("marker-"+name))
	blk, _ := pem.Decode(p.KeyPEM)
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ec := k.(*ecdsa.PrivateKey)
	d, err := ec.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	m := &marker{name: name, finding: finding, certPEM: string(p.CertPEM), keyPEM: string(p.KeyPEM), d: d}
	m.needles = needles(m.keyPEM, d)
	return m
}

// needles are the texts whose presence shows the key: the PEM body's
// first two lines (the last holds only the public key, which the
// certificate shows too), the same lines base64-encoded at each of the
// three alignments a longer text can give them, and the private scalar
// in base64 (standard and URL, each alignment) and hex.
func needles(keyPEM string, d []byte) []string {
	lines := strings.Split(strings.TrimSpace(keyPEM), "\n")
	var out []string
	for _, l := range lines[1:3] {
		out = append(out, l)
		out = append(out, aligned(base64.StdEncoding, []byte(l))...)
	}
	out = append(out, aligned(base64.StdEncoding, d)...)
	out = append(out, aligned(base64.URLEncoding, d)...)
	out = append(out, hex.EncodeToString(d))
	return out
}

// aligned is b's base64 as it appears inside a longer text encoded in
// one piece, at each of the three offsets b can start at: the groups
// that mix in neighbouring bytes are left out.
func aligned(enc *base64.Encoding, b []byte) []string {
	var out []string
	for pad := range 3 {
		s := enc.EncodeToString(append(make([]byte, pad), b...))
		start := 0
		if pad > 0 {
			start = 4
		}
		out = append(out, s[start:len(s)-4])
	}
	return out
}

// markers are the test's planted keys, by name.
type markers map[string]*marker

// in returns the names of the markers text shows, sorted: searched in the
// text, in the text with whitespace and JSON escapes dropped (so that
// wrapped base64 joins up), in whatever its base64 runs decode to, to a
// depth of three, and in the JSON strings of it that are JSON themselves.
func (ms markers) in(text string) []string {
	texts := views(text, 0, nil)
	var found []string
	for name, m := range ms {
		if m.inAny(texts) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}

func (m *marker) inAny(texts []string) bool {
	for _, text := range texts {
		for _, n := range m.needles {
			if strings.Contains(text, n) {
				return true
			}
		}
	}
	return false
}

var (
	joiner  = strings.NewReplacer(`\n`, "", `\r`, "", `\t`, "", "\n", "", "\r", "", "\t", "", " ", "", `\u003d`, "=", `\u002b`, "+", `\/`, "/")
	b64Runs = regexp.MustCompile(`[A-Za-z0-9+/_-]{48,}={0,2}`)
)

// views appends to out the forms of text a key could be found in.
func views(text string, depth int, out []string) []string {
	joined := joiner.Replace(text)
	out = append(out, text, joined)
	if depth == 3 {
		return out
	}
	for _, run := range b64Runs.FindAllString(joined, 1000) {
		for _, dec := range decodings(run) {
			out = views(dec, depth+1, out)
		}
	}
	if depth == 0 {
		for _, s := range jsonInJSON(text) {
			out = views(s, 1, out)
		}
	}
	return out
}

// decodings are what run decodes to as base64, standard or URL, from
// each of its first four characters (the run may begin with a word that
// is not part of it).
func decodings(run string) []string {
	run = strings.TrimRight(run, "=")
	var out []string
	for off := range 4 {
		s := run[off:]
		s = s[:len(s)-len(s)%4]
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				out = append(out, string(b))
			}
		}
	}
	return out
}

// jsonInJSON returns the strings of a JSON text that are JSON objects
// themselves (a stored object's body held as a string).
func jsonInJSON(text string) []string {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(strings.TrimSpace(x), "{") {
				out = append(out, x)
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
	return out
}

// wrap cuts s into lines of n characters, as base64 tools write it,
// ending in as many newlines as make its length a multiple of four
// (protojson, which skips the newlines, decides on padding by the length
// with them).
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s + "\n")
	for b.Len()%4 != 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// jwks is a JSON Web Key Set holding m's key with its private member d.
func (m *marker) jwks(t *testing.T) string {
	t.Helper()
	blk, _ := pem.Decode([]byte(m.keyPEM))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.(*ecdsa.PrivateKey).PublicKey
	pt, err := pub.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "kid": "matrix", "alg": "ES256",
		"x": enc(pt[1:33]), "y": enc(pt[33:]), "d": enc(m.d),
	}}})
	return string(b)
}

// TestMarkersFound checks the detector on the forms the matrix relies on:
// a leak it cannot see would make every cell pass.
func TestMarkersFound(t *testing.T) {
	ca := certstest.NewCA(t, "markers")
	m := newMarker(t, ca, "x", "none")
	ms := markers{"x": m}
	combined := base64.StdEncoding.EncodeToString([]byte(m.certPEM + m.keyPEM))
	nested, _ := json.Marshal(map[string]string{"body": `{"inlineBytes":"` + wrap(combined, 76) + `"}`})
	for name, text := range map[string]string{
		"pem":               m.keyPEM,
		"pem in JSON":       string(must(json.Marshal(m.keyPEM))),
		"combined base64":   combined,
		"wrapped base64":    wrap(combined, 76),
		"wrapped in YAML":   "inline_bytes: |-\n    " + strings.ReplaceAll(wrap(combined, 76), "\n", "\n    "),
		"wrapped in JSON":   string(must(json.Marshal(wrap(combined, 64)))),
		"double base64":     base64.StdEncoding.EncodeToString([]byte(combined)),
		"nested JSON":       string(nested),
		"jwks":              m.jwks(t),
		"d in hex":          "d=" + hex.EncodeToString(m.d),
		"key base64 offset": "xx" + base64.StdEncoding.EncodeToString([]byte("ab"+m.keyPEM)),
	} {
		if got := ms.in(text); len(got) != 1 {
			t.Errorf("%s: the marker is not found in %.200q", name, text)
		}
	}
	if got := ms.in(m.certPEM + " [redacted] " + base64.StdEncoding.EncodeToString([]byte(m.certPEM))); len(got) != 0 {
		t.Errorf("the certificate alone is taken for the key")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
