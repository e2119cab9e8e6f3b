package redact

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// fuzzKinds are the PEM private key blocks the fuzzer plants.
var fuzzKinds = []string{"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY", "DSA PRIVATE KEY"}

// fuzzFields are where a stored object holds the key: DataSources under
// fields not named as secret (so only decoding finds the key), and a
// plain string (a Lua script's code).
var fuzzFields = []string{"certificateChain", "trustedCa", "watchedDirectory", "inline_code"}

// FuzzRedactStoredObject plants a PEM private key block somewhere in
// other text (garbage, a certificate before or after it, cut short or
// not) inside a stored object's inline_bytes (base64 in either alphabet,
// padded or not, wrapped at any width with any first-line offset, by
// newlines, CRLF or spaces) or inline_string, and redacts the JSON body
// (JSON) and the body as text (String, what a body that is not JSON gets).
// Property: nothing of the key's body survives, in clear (a run of its
// base64) or decoded (its DER bytes), from any base64 offset. The marker
// bytes are derived from the inputs' hash, so the fuzzer cannot plant
// them in the garbage around the key.
//
//	go test -run '^$' -fuzz FuzzRedactStoredObject -fuzztime 60s ./internal/redact
func FuzzRedactStoredObject(f *testing.F) {
	f.Add("", "", uint8(0), uint8(64), uint8(64), uint8(0), uint8(0), false, uint16(0))
	f.Add("Bag Attributes\n    localKeyID: 01 00\n", "", uint8(0), uint8(76), uint8(13), uint8(1), uint8(0), true, uint16(0))
	f.Add("x", "trailer", uint8(1), uint8(10), uint8(3), uint8(2), uint8(3), false, uint16(17))
	f.Add("garbage\x00\xff", "-----BEGIN CERTIFICATE-----", uint8(2), uint8(1), uint8(1), uint8(3), uint8(5), true, uint16(0))
	f.Add("", "", uint8(3), uint8(64), uint8(0), uint8(0), uint8(2), false, uint16(0))
	f.Fuzz(func(t *testing.T, before, after string, mode, width, first, field, kind uint8, withCert bool, cut uint16) {
		if len(before)+len(after) > 4096 {
			return
		}
		sum := sha256.Sum256([]byte(before + "\x00" + after + string([]byte{mode, width, first, field, kind}) + string(rune(cut))))
		der := append([]byte{0x30, 0x82, 0x01, 0x22, 0x02, 0x01, 0x00}, sum[:]...)
		der = append(der, sum[:]...)
		body := base64.StdEncoding.EncodeToString(der)
		marker := body[12:40] // well inside the body, past its DER header
		pemText := "-----BEGIN " + fuzzKinds[int(kind)%len(fuzzKinds)] + "-----\n" + wrap(body, 64, 64, "\n") + "\n-----END " + fuzzKinds[int(kind)%len(fuzzKinds)] + "-----\n"
		if cut > 0 {
			// Cut short somewhere past the marker: a quoted prefix.
			end := strings.Index(pemText, marker) + len(marker)
			pemText = pemText[:min(len(pemText), end+int(cut)%64)]
		}
		content := before + pemText + after
		if withCert {
			content = before + cert + pemText + after
			if cut%2 == 1 {
				content = before + pemText + cert + after
			}
		}
		name := fuzzFields[int(field)%len(fuzzFields)]
		value := fuzzEncode(content, mode, width, first)
		var doc string
		if name == "inline_code" {
			doc = `{"name":"lua","inline_code":` + quote(content) + `}`
		} else {
			member := "inlineBytes"
			if mode%4 == 3 {
				member = "inlineString"
			}
			doc = `{"name":"s","tlsCertificate":{"` + name + `":{"` + member + `":` + quote(value) + `}}}`
		}
		for how, out := range map[string]string{"JSON": string(JSON([]byte(doc))), "String": String(doc)} {
			if shows(out, marker, sum[:12]) {
				t.Fatalf("%s shows the key (marker %s):\nin:  %q\nout: %q", how, marker, doc, out)
			}
		}
	})
}

// fuzzEncode is content as a stored inline_bytes (or, mode 3, the text of
// an inline_string): base64 in the alphabet mode picks, wrapped at width
// after a first line of first characters, by the separator mode picks.
func fuzzEncode(content string, mode, width, first uint8) string {
	if mode%4 == 3 {
		return content
	}
	enc := []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding, base64.RawStdEncoding}[mode%4]
	s := enc.EncodeToString([]byte(content))
	if width == 0 {
		return s
	}
	sep := []string{"\n", "\r\n", " ", "\n  "}[mode/4%4]
	return wrap(s, int(width), int(first), sep)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shows reports whether out holds the key: the marker (a run of the key's
// base64) in clear, or the key's bytes (raw) in clear or base64-decoded
// from any offset of any run of base64 in out, its wrapping taken out.
func shows(out, marker string, raw []byte) bool {
	if strings.Contains(out, marker) || strings.Contains(out, string(raw)) {
		return true
	}
	for _, run := range b64Run.FindAllString(out, -1) {
		clean := stripB64(run)
		for off := 0; off < 4 && off < len(clean); off++ {
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				if d := decodeAll(enc, clean[off:]); strings.Contains(d, marker) || strings.Contains(d, string(raw)) {
					return true
				}
			}
		}
	}
	return false
}

// decodeAll decodes base64 as far as it goes, then on past each bad
// group, so no decodable stretch is missed.
func decodeAll(enc *base64.Encoding, s string) string {
	var b strings.Builder
	for len(s) >= 2 {
		d := decodePrefix(enc, s)
		b.Write(d)
		used := len(d) / 3 * 4
		if used >= len(s)-3 {
			break
		}
		s = s[used+4:]
	}
	return b.String()
}
