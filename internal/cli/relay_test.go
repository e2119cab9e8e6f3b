package cli

import (
	"strings"
	"testing"
)

// relay --help lists its flags in sections, every flag in exactly one.
func TestRelayHelpInSections(t *testing.T) {
	checkSectionedHelp(t, "relay", 30, "Upstream flags:", "Admin API flags:", "Security flags:", "Limits flags:")
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
