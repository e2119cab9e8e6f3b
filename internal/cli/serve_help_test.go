package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// serve --help lists its flags in sections (xDS, admin API, store,
// security, limits, replicas, ...), every flag in exactly one.
func TestServeHelpInSections(t *testing.T) {
	help := checkSectionedHelp(t, "serve", 50, "xDS flags:", "Admin API flags:", "Store flags:", "Security flags:", "Limits flags:", "Replicas and stopping flags:")
	if strings.Contains(help, "\nFlags:\n") || strings.Contains(help, "\nGlobal Flags:\n") {
		t.Errorf("serve --help still has one list of flags:\n%s", help)
	}
}

// checkSectionedHelp runs `command --help` (usageIn's), checks it has the
// section titles and lists every visible flag exactly once (at least
// minFlags of them, so that a broken walk shows), and returns the help.
func checkSectionedHelp(t *testing.T, command string, minFlags int, titles ...string) string {
	t.Helper()
	code, help, stderr := run(command, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d: %s", command, code, stderr)
	}
	for _, title := range titles {
		if !strings.Contains(help, "\n"+title+"\n") {
			t.Errorf("%s --help lacks the section %q", command, title)
		}
	}
	cmd, _, err := newRoot(nil, nil, func(string) string { return "" }).Find([]string{command})
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
			t.Errorf("--%s is listed %d times in %s --help, want once", f.Name, got, command)
		}
	}
	cmd.InitDefaultHelpFlag()
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if n < minFlags {
		t.Errorf("visited %d flags: the walk is broken", n)
	}
	return help
}
