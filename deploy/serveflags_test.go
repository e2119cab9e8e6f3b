package deploy_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/cli"
)

// serveFlags returns the long flags `pylon serve --help` lists (its own
// and the global ones), from the real command line.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	out := runServeHelp(t, nil)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(out, -1) {
		flags[m[1]] = true
	}
	if !flags["xds-addr"] || !flags["data-dir"] {
		t.Fatalf("pylon serve --help lists no --xds-addr or --data-dir: the help's format changed?\n%s", out)
	}
	return flags
}

// runServeHelp runs `pylon serve ARGS... --help` in process: the flags are
// parsed (a name or a value the command refuses fails) and the help is
// printed instead of serving.
func runServeHelp(t *testing.T, args []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	full := append(append([]string{"serve"}, args...), "--help")
	if code := cli.Execute(ctx, full, &stdout, &stderr); code != 0 {
		t.Fatalf("pylon %s: exit %d: %s", strings.Join(full, " "), code, stderr.String())
	}
	return stdout.String()
}

// checkServeArgs checks that every flag of args is one `pylon serve`
// has, and that serve parses args as given. where names the file.
func checkServeArgs(t *testing.T, where string, args []string, flags map[string]bool) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || !flags[name] {
			t.Errorf("%s: %s: pylon serve has no flag --%s", where, a, name)
		}
	}
	if !t.Failed() {
		runServeHelp(t, args)
	}
}
