package render

import (
	"regexp"
	"testing"
)

// TestLazyRegexpsCompile: the expressions compiled on first use compile.
func TestLazyRegexpsCompile(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{ownName, safeName} {
		if re() == nil {
			t.Fatal("a lazy expression compiled to nil")
		}
	}
}
