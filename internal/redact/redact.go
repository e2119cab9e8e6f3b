// Package redact is the one place private key material is taken out of
// what Pylon shows: every dump (admin API, CLI), every stored body it
// returns, and every error and log line that may quote an input go through
// it, so no caller has to remember which fields are secret.
//
// Three entry points share one rule of what is secret:
//   - Message walks any proto message reflectively, through
//     google.protobuf.Any at any depth (unpacked with the global registry);
//   - JSON walks a JSON body (a stored object, protojson or the model) by
//     the same field names;
//   - String scrubs PEM private key blocks (also truncated ones, and their
//     base64 encoding, which is how protojson shows inline_bytes) from any
//     text.
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

// b64PEM matches base64 text that starts with "-----BEGIN": protojson's
// form of a PEM block held in bytes.
var b64PEM = regexp.MustCompile(`LS0tLS1CRUdJT[A-Za-z0-9+/=_-]*`)

// String returns s with every private key block replaced.
func String(s string) string {
	if !mayHoldKey(s) {
		return s
	}
	s = pemKey.ReplaceAllString(s, Redacted)
	return b64PEM.ReplaceAllStringFunc(s, func(m string) string {
		if b64HoldsKey(m) {
			return Redacted
		}
		return m
	})
}

// Bytes is String for bytes.
func Bytes(b []byte) []byte {
	if !mayHoldKey(string(b)) {
		return b
	}
	return []byte(String(string(b)))
}

// mayHoldKey is the cheap check before the regular expressions.
func mayHoldKey(s string) bool {
	return strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, "LS0tLS1CRUdJT")
}

// b64HoldsKey decodes a base64 run (standard or URL alphabet, padded or
// not) and says whether it holds a private key.
func b64HoldsKey(m string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if d, err := enc.DecodeString(m); err == nil {
			return bytes.Contains(d, []byte("PRIVATE KEY"))
		}
	}
	// Not decodable as a whole (cut short): judge by its decodable prefix.
	n := len(m) / 4 * 4
	d, _ := base64.StdEncoding.DecodeString(strings.TrimRight(m[:n], "="))
	if d == nil {
		d, _ = base64.RawStdEncoding.DecodeString(m[:n])
	}
	return bytes.Contains(d, []byte("PRIVATE")) || len(d) < len("-----BEGIN PRIVATE KEY")
}
