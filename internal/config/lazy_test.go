package config

import (
	"regexp"
	"testing"
)

// TestLazyRegexpsCompile: the expressions compiled on first use compile
// (at init, a typo failed every run at once; now it would fail the first
// diagnostic that needs one).
func TestLazyRegexpsCompile(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{yamlLine, unknownJSONField, protoJSONPrefix, unknownField, unresolvedType, quotedValue, badValue, badMapKey, badWellKnown, badToken, duplicate, jsonStringLit} {
		if re() == nil {
			t.Fatal("a lazy expression compiled to nil")
		}
	}
}
