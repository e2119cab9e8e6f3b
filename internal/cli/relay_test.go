package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// relay --help lists its flags in sections, every flag in exactly one.
func TestRelayHelpInSections(t *testing.T) {
	code, help, stderr := run("relay", "--help")
	if code != 0 {
		t.Fatalf("relay --help: exit %d: %s", code, stderr)
	}
	for _, title := range []string{"Upstream flags:", "Admin API flags:", "Security flags:", "Limits flags:"} {
		if !strings.Contains(help, "\n"+title+"\n") {
			t.Errorf("relay --help lacks the section %q", title)
		}
	}
	relay, _, err := newRoot(nil, nil, func(string) string { return "" }).Find([]string{"relay"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		n++
		line := regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(f.Name) + `\s`)
		if got := len(line.FindAllString(help, -1)); got != 1 {
			t.Errorf("--%s is listed %d times in relay --help, want once", f.Name, got)
		}
	}
	relay.InitDefaultHelpFlag()
	relay.LocalFlags().VisitAll(visit)
	relay.InheritedFlags().VisitAll(visit)
	if n < 30 {
		t.Errorf("visited %d flags: the walk is broken", n)
	}
}

// A relay without an upstream, or keyed per proxy, does not start, and
// says which flag is wrong.
func TestRelayRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "--data-dir", dir, "--admin-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0"}, "--upstream"},
		{[]string{"relay", "--data-dir", dir, "--admin-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--key", "{id}"}, "per proxy"},
		{[]string{"relay", "--data-dir", dir, "--admin-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--upstream-cert", "c.pem"}, "--upstream-ca"},
		{[]string{"relay", "--data-dir", dir, "--admin-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--upstream-for", "edge-*"}, "SELECTOR=HOST:PORT"},
		{[]string{"relay", "--data-dir", dir, "--admin-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--upstream-for", "edge-[=127.0.0.1:2"}, "bad pattern"},
	} {
		code, _, stderr := run(tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("pylon %s: exit %d, stderr %q; want a failure naming %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
