package config

import (
	"encoding/json"
	"testing"
)

// TestSkipValueEndsAValueWhereJSONDoes: the end skipValue finds of a
// value, with more text after it, is where the value ends: strings with
// escaped quotes and backslashes (an even run of them before a quote ends
// the string), nested lists and objects holding brackets in strings.
func TestSkipValueEndsAValueWhereJSONDoes(t *testing.T) {
	values := []string{
		`"plain"`, `""`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `"ends \\\\\\"`, `"]}{[,"`,
		`{"a": "}", "b": ["]", "\"]"], "c": {"d": "\\"}}`, `[[], {}, [{"x": "[\\"}]]`, `[1, 2.5e3, true, null]`,
		`123`, `-1.5`, `true`, `null`,
	}
	for _, v := range values {
		if !json.Valid([]byte(v)) {
			t.Fatalf("%s is not JSON", v)
		}
		for _, after := range []string{"", ", ", "]", "}", ` "next"`} {
			text := v + after
			if got := skipValue(text, 0); got != len(v) {
				t.Errorf("skipValue(%q) = %d, want %d", text, got, len(v))
			}
		}
	}
	// Unterminated text ends at the end, always.
	for _, text := range []string{`"abc`, `"abc\"`, `"abc\`, `[1, "]`, `{"a": [`} {
		if got := skipValue(text, 0); got != len(text) {
			t.Errorf("skipValue(%q) = %d, want %d (the end)", text, got, len(text))
		}
	}
}
