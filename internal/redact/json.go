package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode"
)

// JSON returns a JSON body with key material replaced, by the same field
// names Message uses (proto or JSON spelling), so a stored object that is
// not decoded into its message (a model object, a raw resource of any
// type, a body that no longer decodes) is redacted too. A body that is not
// JSON is scrubbed as text. Nothing secret: the input is returned as is.
func JSON(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Bytes(b)
	}
	out, changed := jsonValue(v, "", false)
	if !changed {
		return b
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	return enc
}

// jsonValue redacts v, the value of field name; all says it sits under a
// secret field.
func jsonValue(v any, name string, all bool) (any, bool) {
	switch x := v.(type) {
	case string:
		if all && x != "" && !locators[name] {
			return Redacted, true
		}
		if r := String(x); r != x {
			return r, true
		}
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = jsonValue(e, name, all)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		return jsonObject(x, name, all)
	}
	return v, false
}

// jsonObject redacts the members of an object that is field parent.
func jsonObject(o map[string]any, parent string, all bool) (any, bool) {
	changed := false
	ds := dataSourceLike(o)
	for k, v := range o {
		name := snake(k)
		secret := all || secretField("", name, jsonKind(v)) || parent == "session_ticket_keys" && name == "keys"
		var c bool
		if s, ok := v.(string); ok && ds && !secret && (name == "inline_bytes" || name == "inline_string") {
			o[k], c = jsonInline(s, name == "inline_bytes", parent)
		} else {
			o[k], c = jsonValue(v, name, secret)
		}
		changed = changed || c
	}
	return o, changed
}

// jsonInline redacts a DataSource's inline contents (inline_bytes as
// base64, however wrapped, when b64), the DataSource being field parent:
// decoded, a private key anywhere in them takes them whole; a JWKS in
// local_jwks loses its private members.
func jsonInline(s string, b64 bool, parent string) (any, bool) {
	content := []byte(s)
	if b64 {
		d, ok := decodeB64(s)
		if !ok {
			// Not base64 (stored before bodies were checked): as text.
			r := String(s)
			return r, r != s
		}
		content = d
	}
	if parent == "local_jwks" {
		red, found := redactJWKS(content)
		switch {
		case !found:
		case b64:
			return base64.StdEncoding.EncodeToString(red), true
		default:
			return string(red), true
		}
	}
	if holdsKey(content) || String(s) != s || String(string(content)) != string(content) {
		return Redacted, true
	}
	return s, false
}

// jsonKind says what a JSON value holds: a DataSource (or a map of them,
// GenericSecret.secrets), text, or neither.
func jsonKind(v any) payloadKind {
	switch x := v.(type) {
	case string:
		return text
	case map[string]any:
		if dataSourceLike(x) {
			return dataSource
		}
		for _, e := range x {
			if o, ok := e.(map[string]any); !ok || !dataSourceLike(o) {
				return noPayload
			}
		}
		if len(x) > 0 {
			return dataSource
		}
	}
	return noPayload
}

// dataSourceLike reports whether an object is a DataSource by its members.
func dataSourceLike(o map[string]any) bool {
	for k := range o {
		switch snake(k) {
		case "inline_string", "inline_bytes", "filename", "environment_variable":
			return true
		}
	}
	return false
}

// snake turns protojson's lowerCamelCase into the proto field name.
func snake(s string) string {
	if strings.IndexFunc(s, unicode.IsUpper) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
