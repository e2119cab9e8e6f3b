package fleet

import (
	"strings"
	"testing"
)

func TestSelectorServesNamesAndGlobs(t *testing.T) {
	s, err := ParseSelector(" web-*, db ,cache-?")
	if err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]bool{"web-eu": true, "web-": true, "db": true, "cache-1": true, "cache-10": false, "dbx": false, "batch": false} {
		if got := s.Serves(group); got != want {
			t.Errorf("%v.Serves(%q) = %v, want %v", s, group, got, want)
		}
	}
	if s.String() != "web-*,db,cache-?" {
		t.Errorf("String() = %q", s.String())
	}
	for _, all := range []string{"", "*", "a,*"} {
		s, err := ParseSelector(all)
		if err != nil || s != nil || !s.Serves("anything") || s.String() != "*" {
			t.Errorf("ParseSelector(%q) = %v, %v; want every group", all, s, err)
		}
	}
}

func TestSelectorRefusesBadPatterns(t *testing.T) {
	for in, want := range map[string]string{
		"a,,b":                          "pattern 2 is empty",
		"web-[":                         `bad pattern "web-["`,
		strings.Repeat("x", 300):        "300 bytes",
		strings.Repeat("a,", 300) + "a": "301 patterns",
	} {
		if _, err := ParseSelector(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSelector(%.20q…) = %v, want an error saying %q", in, err, want)
		}
	}
}
