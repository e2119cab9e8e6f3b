package ctl

import (
	"slices"
	"strings"
	"testing"
)

// A node id is the client's choice: one a shell would split or a terminal
// would interpret is not offered.
func TestCompletionLeavesOutNamesAShellWouldSplit(t *testing.T) {
	got, _ := candidates([]string{"edge-2", "evil\nrm -rf", "a b", "esc\x1b[2J", "edge-1", "edge-2", ""}, "")
	if strings.Join(got, ",") != "edge-1,edge-2" {
		t.Errorf("candidates: %q", got)
	}
}

// A node id is the client's choice, and a shell may insert candidates (or
// their shared prefix) unquoted: only names made of letters, digits and
// ._:@/+=,- are offered, and none that starts with "-" (an option) or "="
// (zsh's command expansion).
func TestCompletionOffersOnlyNamesAShellTakesAsTheyAre(t *testing.T) {
	literal := []string{"edge-1", "node_2.eu-west.example.com", "spiffe://td/ns/a/sa/b", "user@host:8080", "a+b=c,d"}
	special := []string{"$(reboot)", "`reboot`", "a;b", "a|b", "a&b", "a>b", "a<b", "~root", "*", "a*", "a?", "[ab]", "{a,b}",
		"a\\b", "a'b", `a"b`, "!1", "#x", "a%b", "-rf", "--help", "=ls", "édge", "a\u00a0b", "a\u200bb"}
	got, _ := candidates(append(slices.Clone(special), literal...), "")
	want := slices.Sorted(slices.Values(literal))
	if !slices.Equal(got, want) {
		t.Errorf("candidates: %q, want %q", got, want)
	}
}
