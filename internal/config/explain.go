package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pylon-xds/pylon/internal/nodegroup"
)

// Decoding errors are explained here in the config's words: encoding/json's
// (model objects) and protojson's (raw Envoy resources) become a field, a
// line in the user's file and a message that never quotes a value.

var unknownJSONField = lazyRegexp(`unknown field "([^"]+)"`)

// explainJSON turns encoding/json's errors into a field, a message in the
// config's words (never a Go type name), and a function that drops the
// offending field from the object's generic form (nil when it cannot).
func explainJSON(err error) (field, msg string, drop func(any) bool) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field, fmt.Sprintf("expected %s, got %s", expects(te.Type), jsonKind(te.Value)), dropPath(te.Field)
	}
	if m := unknownJSONField().FindStringSubmatch(err.Error()); m != nil {
		return m[1], fmt.Sprintf("unknown field %q", m[1]), dropWhere(func(key string, _ any) bool { return key == m[1] })
	}
	return "", strings.TrimPrefix(err.Error(), "json: "), nil
}

var durationType = reflect.TypeFor[nodegroup.Duration]()

// expects says what a field of Go type t takes, as a config author writes it.
func expects(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return `a duration such as "1.5s"`
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "a whole number, 0 or more"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return "a list"
	case t.Kind() == reflect.Map || t.Kind() == reflect.Struct:
		return "a mapping"
	}
	return "another kind of value"
}

// jsonKind names what encoding/json found ("array", "number -1", ...) in
// the config's words.
func jsonKind(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "a mapping"
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return v
}

// dropPath returns a function that deletes the field at a dotted path
// ("endpoints.port") from a generic JSON value, in every element of the
// lists on the way; it reports whether it deleted anything.
func dropPath(path string) func(any) bool {
	if path == "" {
		return nil
	}
	keys := strings.Split(path, ".")
	var walk func(v any, keys []string) bool
	walk = func(v any, keys []string) bool {
		switch x := v.(type) {
		case []any:
			dropped := false
			for _, e := range x {
				dropped = walk(e, keys) || dropped
			}
			return dropped
		case map[string]any:
			if len(keys) == 1 {
				_, ok := x[keys[0]]
				delete(x, keys[0])
				return ok
			}
			return walk(x[keys[0]], keys[1:])
		}
		return false
	}
	return func(v any) bool { return walk(v, keys) }
}

// dropWhere returns a function that deletes, at any depth, every map entry
// for which match is true; it reports whether it deleted anything.
func dropWhere(match func(key string, val any) bool) func(any) bool {
	var walk func(v any) bool
	walk = func(v any) bool {
		dropped := false
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				dropped = walk(e) || dropped
			}
		case map[string]any:
			for k, e := range x {
				if match(k, e) {
					delete(x, k)
					dropped = true
					continue
				}
				dropped = walk(e) || dropped
			}
		}
		return dropped
	}
	return walk
}

func lastField(f string) string {
	if i := strings.LastIndex(f, "."); i >= 0 {
		return f[i+1:]
	}
	return f
}

var (
	// protojson separates its prefix with a non-breaking space on purpose;
	// match any space.
	protoJSONPrefix = lazyRegexp(`^proto:[\s\x{00a0}]*(\(line \d+:\d+\):[\s\x{00a0}]*)?`)
	unknownField    = lazyRegexp(`unknown field "([^"]+)"`)
	unresolvedType  = lazyRegexp(`unable to resolve "([^"]+)"`)
	quotedValue     = lazyRegexp(`value "([^"]*)"`)

	// protojson's messages that end with the refused value: the value is
	// captured to find its line and to say what kind it was, never shown.
	badValue     = lazyRegexp(`invalid value for ([a-z0-9]+) field ([A-Za-z0-9_]+): (.*)`)
	badMapKey    = lazyRegexp(`invalid value for ([a-z0-9]+) key: (.*)`)
	badWellKnown = lazyRegexp(`(?:invalid )?google\.protobuf\.(Duration|Timestamp|Value|FieldMask)(?: value| value out of range:|:| contains invalid path:)? (.*)`)
	badToken     = lazyRegexp(`unexpected token (.*)`)
	duplicate    = lazyRegexp(`duplicate (?:field|map key) (.*)`)
	// jsonStringLit is a JSON string literal anywhere in a message.
	jsonStringLit = lazyRegexp(`"(?:[^"\\]|\\.)*"`)
)

// explainProtoJSON rewrites protojson's errors, whose line numbers refer to
// the intermediate JSON rather than the user's file, into a field, a message
// and a line in the user's file that an operator can act on.
//
// The message never quotes a value of the resource: a refused value may be
// key material (an inline_bytes that is not base64, a private key where a
// mapping belongs), and the message reaches GET /status, the log, `pylon
// validate` and the API's 400. It says what is wrong instead; the field and
// line say where.
func explainProtoJSON(err error, node *yaml.Node) (field, msg string, line int) {
	text := protoJSONPrefix().ReplaceAllString(err.Error(), "")
	line = node.Line
	if m := unknownField().FindStringSubmatch(text); m != nil {
		field, msg = m[1], fmt.Sprintf("unknown field %q", m[1])
		if k, l := findKeyLine(node, field); l > 0 {
			field, line = k, l
		}
		return field, msg, line
	}
	if m := unresolvedType().FindStringSubmatch(text); m != nil {
		msg = fmt.Sprintf("unknown @type %q in a nested typed_config (not an Envoy v3 message Pylon knows)", m[1])
		if _, l := findValue(node, m[1]); l > 0 {
			line = l
		}
		return "@type", msg, line
	}
	if m := badValue().FindStringSubmatch(text); m != nil {
		field, line = locate(node, m[2], m[3], line)
		return field, badValueMessage(m[1], m[3]), line
	}
	if field, msg, raw, ok := explainOther(text); ok {
		k, l := locate(node, field, raw, line)
		return k, msg, l
	}
	// A message this code does not know: keep its words, not its values.
	return "", scrubValues(text), line
}

// explainOther explains protojson's messages other than a bad field value:
// the field when it names one, the message, and the raw value (to find the
// line, never to show).
func explainOther(text string) (field, msg, raw string, ok bool) {
	if m := badMapKey().FindStringSubmatch(text); m != nil {
		return "", fmt.Sprintf("a map key is not a valid %s", m[1]), m[2], true
	}
	if m := badWellKnown().FindStringSubmatch(text); m != nil {
		switch m[1] {
		case "Duration":
			msg = "not a valid duration (write it like \"1.5s\" or \"0.250s\", within about ±10000 years)"
		case "Timestamp":
			msg = "not a valid RFC 3339 timestamp (write it like \"2026-01-02T15:04:05Z\")"
		case "FieldMask":
			msg = "not a valid field mask path"
		default:
			msg = "not a valid JSON value"
		}
		return "", msg, m[2], true
	}
	if m := badToken().FindStringSubmatch(text); m != nil {
		return "", fmt.Sprintf("got %s, which this field does not take (a mapping or a list is expected here)", tokenKind(m[1])), m[1], true
	}
	if m := duplicate().FindStringSubmatch(text); m != nil {
		return strings.Trim(m[1], `"`), "set twice (also as its camelCase or snake_case spelling?)", "", true
	}
	return "", "", "", false
}

// locate finds the line of a bad value: by its field when protojson names
// one (the wrapper types' inner "value" names nothing the user wrote), else
// by the value itself. It returns the key as the user wrote it.
func locate(node *yaml.Node, field, raw string, line int) (string, int) {
	if field != "" && field != "value" {
		if k, l := findKeyLine(node, field); l > 0 {
			return k, l
		}
	}
	if v, err := strconv.Unquote(raw); err == nil {
		raw = v
	}
	if k, l := findValue(node, raw); l > 0 {
		return k, l
	}
	return field, line
}

// badValueMessage says what a field of protobuf kind takes, and the kind
// of value it got, without the value.
func badValueMessage(kind, raw string) string {
	got := tokenKind(raw)
	switch kind {
	case "bytes":
		if got == "a string" {
			return "not valid base64 (bytes fields take base64, standard or URL-safe)"
		}
		return "expected base64 text, got " + got
	case "string":
		return "expected a string, got " + got
	case "bool":
		return "expected true or false, got " + got
	case "float", "double":
		return "expected a number, got " + got
	case "enum":
		if got == "a string" {
			return "not one of the enum's value names"
		}
		return "expected one of the enum's value names, got " + got
	case "message", "group":
		return "expected a mapping, got " + got
	}
	if strings.Contains(kind, "int") || strings.Contains(kind, "fixed") {
		return fmt.Sprintf("expected a whole number that fits a %s, got %s", kind, got)
	}
	return fmt.Sprintf("not a valid %s, got %s", kind, got)
}

// tokenKind names the kind of a raw JSON token: "a string", "a list", ...
func tokenKind(raw string) string {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return "nothing"
	case raw[0] == '"':
		return "a string"
	case raw[0] == '[':
		return "a list"
	case raw[0] == '{':
		return "a mapping"
	case raw == "true" || raw == "false":
		return "a boolean"
	case raw == "null":
		return "null"
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return "a number"
	}
	return "a value of another kind"
}

// scrubValues removes what may be a value from a message this code does not
// recognise: every JSON string, and what follows the last colon.
func scrubValues(text string) string {
	text = jsonStringLit().ReplaceAllString(text, `"…"`)
	if i := strings.LastIndex(text, ": "); i >= 0 {
		text = text[:i]
	}
	return text
}

// findKeyLine finds the first mapping key under n, depth first, that is key
// in snake or camel case (protojson names fields by their JSON name, the
// file may use either), and returns the key as written and its line.
func findKeyLine(n *yaml.Node, key string) (string, int) {
	want := lowerCamel(key)
	var walk func(*yaml.Node, int) (string, int)
	walk = func(n *yaml.Node, depth int) (string, int) {
		if depth > maxDepth {
			return "", 0
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i].Value; lowerCamel(k) == want {
					return k, n.Content[i].Line
				}
			}
		}
		for _, c := range n.Content {
			if k, l := walk(c, depth+1); l > 0 {
				return k, l
			}
		}
		return "", 0
	}
	return walk(n, 0)
}

// findValue finds the first mapping entry under n whose scalar value is v
// and returns its key and line.
func findValue(n *yaml.Node, v string) (string, int) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if val := n.Content[i+1]; val.Kind == yaml.ScalarNode && val.Value == v {
				return n.Content[i].Value, val.Line
			}
		}
	}
	for _, c := range n.Content {
		if k, l := findValue(c, v); l > 0 {
			return k, l
		}
	}
	return "", 0
}
