// Package redact is the one place private key material is taken out of
// what Pylon shows: every dump (admin API, CLI), every stored body it
// returns, and every error and log line that may quote an input go through
// it, so no caller has to remember which fields are secret.
//
// Four entry points share one rule of what is secret:
//   - Message walks any proto message reflectively, through
//     google.protobuf.Any at any depth (unpacked with the global registry);
//   - Inline is the same walk finding rather than replacing: the field
//     paths of key material in a message, for the gates that refuse it
//     outside a Secret (snapshot's output gate, render);
//   - JSON walks a JSON body (a stored object, protojson or the model) by
//     the same field names;
//   - String scrubs PEM private key blocks (also truncated ones) and any
//     base64 that decodes to one (however wrapped, wherever in the
//     encoding the key starts) from any text.
//
// Contents are decoded before they are judged: a DataSource's inline
// bytes (base64 in JSON, with any wrapping, either alphabet) and inline
// string go whole when they hold a private key anywhere (a certificate
// file with its key appended), PEM or DER; a JWKS inline in jwt_authn's
// local_jwks keeps its public members and loses its private ones (RSA's
// d, p, q, dp, dq, qi, oth, EC's d, a symmetric key's k).
//
// Certificates and CAs are public and stay, and so do file names and
// environment variable names of DataSources: they say where a key is, not
// what it is, and an operator debugging a config needs them.
package redact

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
)

// Redacted replaces every secret payload.
const Redacted = "[redacted]"

// secretNames are fields that hold key material in any message, by their
// proto name. Found by reading the Envoy v3 protos:
// transport_sockets/tls/v3 (TlsCertificate.private_key, password, pkcs12,
// private_key_provider; GenericSecret.secret and secrets, see secretField),
// config/core/v3 GrpcService.GoogleGrpc (SslCredentials.private_key,
// CallCredentials.access_token, google_refresh_token, json_key,
// authorization_token), config/trace/v3 (LightstepConfig.access_token).
// OAuth2's hmac_secret and token_secret are SDS references (names), not
// material; the Secrets they name are redacted as Secrets.
var secretNames = map[string]bool{
	"private_key":          true,
	"password":             true,
	"pkcs12":               true,
	"private_key_provider": true,
	"access_token":         true,
	"google_refresh_token": true,
	"json_key":             true,
	"authorization_token":  true,
	"api_key":              true,
	"client_secret":        true,
}

// locators say where or what a secret is, not what it holds: they stay
// even inside a secret (a DataSource's file name, a private key provider's
// name, an Any's type).
var locators = map[string]bool{"filename": true, "environment_variable": true, "provider_name": true, "@type": true, "type_url": true}

// secretSuffixes mark a field as secret by its name's end when it holds a
// payload (a string, bytes or a DataSource), so a new extension's
// "signing_secret" or "upstream_password" is covered without a new entry.
// A message-typed field with such a name (an SdsSecretConfig reference,
// a duration) is walked normally.
var secretSuffixes = []string{"_secret", "_password", "_private_key", "_token", "_passphrase"}

// ticketKeysParent holds session ticket keys in a repeated field named
// only "keys": secret because of where it is.
const ticketKeysParent = "envoy.extensions.transport_sockets.tls.v3.TlsSessionTicketKeys"

// payloadKind is what a field's type can hold.
type payloadKind int

const (
	noPayload  payloadKind = iota // a number, a bool, a message of other fields
	text                          // a string or bytes
	dataSource                    // an Envoy DataSource (or a map of them)
)

// secretField reports whether a field of the named message holds key
// material. "secret" and "secrets" are secret only as DataSources
// (GenericSecret's): as text they name a Secret (a model listener's
// tls.secret), which an operator needs to see. A suffix match needs a
// payload.
func secretField(parent, name string, kind payloadKind) bool {
	switch {
	case secretNames[name], parent == ticketKeysParent && name == "keys":
		return true
	case name == "secret" || name == "secrets":
		return kind == dataSource
	case kind == noPayload:
		return false
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// pemKey matches a PEM private key block of any flavour (PKCS#8, RSA, EC,
// ENCRYPTED, OPENSSH): to its END line, or, cut short (an error message
// that quotes a prefix), as far as PEM body characters go. The body class
// takes backslashes too: quoted text shows newlines as \n.
var pemKey = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:(?s:.*?)-----END[A-Z0-9 ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\:,.\-]*)`)

// b64Run matches a run of base64 text, wrapped or not (whitespace, or
// the \n and \r escapes quoted text shows, between its lines, however
// short). It is decoded before it is judged, so a key's base64 is found
// however it was wrapped and wherever in the encoding it starts.
var b64Run = regexp.MustCompile(`[A-Za-z0-9+/_-][A-Za-z0-9+/=_-]*(?:(?:\s|\\[nrt])+[A-Za-z0-9+/_-][A-Za-z0-9+/=_-]*)*`)

// minRun is the shortest base64 worth decoding: "-----BEGIN" encoded.
const minRun = len("LS0tLS1CRUdJT")

// String returns s with every private key block replaced, as PEM text or
// as base64 of any part of a text that holds one.
func String(s string) string {
	if !mayHoldKey(s) {
		return s
	}
	s = pemKey.ReplaceAllString(s, Redacted)
	return b64Run.ReplaceAllStringFunc(s, func(m string) string {
		if b64HoldsKey(m) {
			return Redacted
		}
		return m
	})
}

// Bytes is String for bytes.
func Bytes(b []byte) []byte {
	if !mayHoldKeyBytes(b) {
		return b
	}
	return []byte(String(string(b)))
}

// mayHoldKey is the cheap check before the regular expressions: a PEM
// private key's header; "-----BEGIN" in base64, from any of the three
// places in a 3-byte group it may start at, once the text's wrapping is
// taken out; or base64 that starts as a DER key's does (a SEQUENCE, then a
// one-byte INTEGER). It reads s once and allocates nothing. Its bytes
// form also runs on a message's whole encoding (where strings sit as they
// are, at any depth), so it does not ask for a word boundary before a DER
// key: it may look where there is nothing, never the other way.
func mayHoldKey(s string) bool {
	return len(s) >= minRun && (strings.Contains(s, "PRIVATE KEY") || scanKey(s))
}

// mayHoldKeyBytes is mayHoldKey for bytes, copying nothing.
func mayHoldKeyBytes(b []byte) bool {
	return len(b) >= minRun && (bytes.Contains(b, []byte("PRIVATE KEY")) || scanKey(b))
}

// scanKey is mayHoldKey's reading for base64.
func scanKey[T string | []byte](s T) bool {
	var last [16]byte // the last base64 characters, wrapping left out
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case wrapping(c):
			continue
		case c == '\\' && i+1 < len(s) && escapedWrapping(s[i+1]):
			i++
			continue
		case !isB64(c):
			n = 0
			continue
		}
		copy(last[:], last[1:])
		last[len(last)-1] = c
		n++
		if (c == 'T' || c == 'O' || c == 'U') && n >= len(beginB64[2]) && containsBegin(string(last[len(last)-min(n, len(last)):])) {
			return true
		}
		if c == 'M' && derPrefixAt(s[i:]) {
			return true
		}
	}
	return false
}

func wrapping(c byte) bool        { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func escapedWrapping(c byte) bool { return c == 'n' || c == 'r' || c == 't' }

// derPrefixAt reports whether the base64 text s starts with (wrapping left
// out) starts as a DER key's does: a SEQUENCE (of any length form) then a
// one-byte INTEGER.
func derPrefixAt[T string | []byte](s T) bool {
	var src [12]byte
	n := 0
	for i := 0; i < len(s) && n < len(src); i++ {
		switch c := s[i]; {
		case isB64(c):
			src[n] = c
			n++
		case wrapping(c):
		case c == '\\' && i+1 < len(s) && escapedWrapping(s[i+1]):
			i++
		default:
			return false
		}
	}
	if n < len(src) {
		return false
	}
	var d [9]byte
	enc := base64.RawStdEncoding
	if bytes.ContainsAny(src[:], "-_") {
		enc = base64.RawURLEncoding
	}
	if _, err := enc.Decode(d[:], src[:]); err != nil || d[0] != 0x30 {
		return false
	}
	i := 2
	if d[1]&0x80 != 0 {
		i += int(d[1] & 0x7f)
	}
	return i+1 < len(d) && d[i] == 0x02 && d[i+1] == 0x01
}

// beginB64 is "-----BEGIN" in base64 at each offset in a 3-byte group:
// the characters that depend on it alone.
var beginB64 = [3]string{"LS0tLS1CRUdJT", "tLS0tLUJFR0lO", "0tLS0tQkVHSU"}

func containsBegin(s string) bool {
	for _, b := range beginB64 {
		if strings.Contains(s, b) {
			return true
		}
	}
	return false
}

func isB64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

// pemKeyHeader is the start of a PEM private key block of any kind.
var pemKeyHeader = regexp.MustCompile(`BEGIN[A-Z0-9 ]*PRIVATE KEY`)

// holdsKey reports whether decoded content holds private key material: a
// PEM private key block (of any kind, whole or cut short) or a DER key.
func holdsKey(b []byte) bool {
	return pemKeyHeader.Match(b) || derKey(b)
}

// derKey reports whether b starts as a DER private key does: a SEQUENCE
// whose first member is a small INTEGER version (0 or 1: PKCS#8 and its
// v2, PKCS#1 RSA, SEC 1 EC; 3: a PKCS#12 bundle). A certificate, a CSR
// or a public key starts its SEQUENCE with another SEQUENCE.
func derKey(b []byte) bool {
	if len(b) < 5 || b[0] != 0x30 {
		return false
	}
	i := 2
	if b[1]&0x80 != 0 {
		n := int(b[1] & 0x7f)
		if n < 1 || n > 3 {
			return false
		}
		i += n
	}
	if len(b) < i+3 || b[i] != 0x02 || b[i+1] != 0x01 {
		return false
	}
	v := b[i+2]
	return v == 0 || v == 1 || v == 3
}

// b64HoldsKey decodes a base64 run (standard or URL alphabet, padded or
// not, wrapped or not, from any of the four positions in a 4-character
// group it may start at) and says whether it holds a private key. A run
// that decodes to the start of a PEM header cut short counts: it may be
// a key's.
func b64HoldsKey(m string) bool {
	clean := stripB64(m)
	if len(clean) < minRun {
		return false
	}
	for off := 0; off < 4 && off < len(clean); off++ {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			d := decodePrefix(enc, clean[off:])
			if holdsKey(d) || off == 0 && cutShortHeader(d) {
				return true
			}
		}
	}
	// A DER key's base64 after words the run took in ("key MIIEv..."):
	// judged from each word's start.
	for i := 1; i < len(m); i++ {
		if m[i] == 'M' && !isB64(m[i-1]) && m[i-1] != '=' {
			if d := decodePrefix(base64.RawStdEncoding, stripB64(m[i:min(len(m), i+64)])); derKey(d) {
				return true
			}
		}
	}
	return false
}

// cutShortHeader reports whether d is a PEM header cut short before it
// says what it begins: it may be a key's.
func cutShortHeader(d []byte) bool {
	return bytes.HasPrefix(d, []byte("-----BEGIN")) && !bytes.Contains(d[5:], []byte("-----")) && len(d) < len("-----BEGIN ENCRYPTED PRIVATE KEY-----")
}

// stripB64 is base64 text without its wrapping (whitespace and the
// escapes of quoted text) and padding.
func stripB64(m string) string {
	var b strings.Builder
	b.Grow(len(m))
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case c == '\\' && i+1 < len(m) && strings.IndexByte("nrt", m[i+1]) >= 0:
			i++
		case isB64(c):
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodePrefix decodes as much of unwrapped, unpadded base64 as decodes.
func decodePrefix(enc *base64.Encoding, s string) []byte {
	if len(s)%4 == 1 {
		s = s[:len(s)-1]
	}
	dst := make([]byte, enc.DecodedLen(len(s)))
	n, _ := enc.Decode(dst, []byte(s))
	return dst[:n]
}

// decodeB64 decodes a whole base64 text (an inline_bytes as JSON shows
// it), either alphabet, padded or not, wrapped or not; ok is false when
// it is not base64.
func decodeB64(m string) ([]byte, bool) {
	for i := 0; i < len(m); i++ {
		if c := m[i]; !isB64(c) && strings.IndexByte("= \t\n\r", c) < 0 {
			return nil, false
		}
	}
	s := stripB64(m)
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	d, err := enc.DecodeString(s)
	return d, err == nil
}
