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
	code, help, stderr := run("serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help: exit %d: %s", code, stderr)
	}
	for _, title := range []string{"xDS flags:", "Admin API flags:", "Store flags:", "Security flags:", "Limits flags:", "Replicas and stopping flags:"} {
		if !strings.Contains(help, "\n"+title+"\n") {
			t.Errorf("serve --help lacks the section %q", title)
		}
	}
	if strings.Contains(help, "\nFlags:\n") || strings.Contains(help, "\nGlobal Flags:\n") {
		t.Errorf("serve --help still has one list of flags:\n%s", help)
	}
	serve, _, err := newRoot(nil, nil, func(string) string { return "" }).Find([]string{"serve"})
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
			t.Errorf("--%s is listed %d times in serve --help, want once", f.Name, got)
		}
	}
	serve.InitDefaultHelpFlag()
	serve.LocalFlags().VisitAll(visit)
	serve.InheritedFlags().VisitAll(visit)
	if n < 50 {
		t.Errorf("visited %d flags: the walk is broken", n)
	}
}
