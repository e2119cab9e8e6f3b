package cli

import (
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/pipeline"
)

// `pylon get` without a kind says which kinds there are, as a wrong kind
// does, instead of cobra's count of arguments; it needs no running Pylon.
func TestGetWithoutKindListsTheKinds(t *testing.T) {
	code, _, stderr := run("get")
	if code == 0 || !strings.Contains(stderr, "say what to list: "+getKinds) {
		t.Fatalf("pylon get: exit %d, stderr %q; want the kinds listed", code, stderr)
	}
	code, _, stderr = run("get", "clusters", "routes")
	if code == 0 || !strings.Contains(stderr, "one kind at a time") {
		t.Fatalf("pylon get clusters routes: exit %d, stderr %q", code, stderr)
	}
}

// `pylon status` with no proxy connected says so under the table's head,
// with how to connect one, rather than an empty table.
func TestStatusWithoutProxiesSaysSo(t *testing.T) {
	var b strings.Builder
	if err := proxyTable(&b, pipeline.Status{Version: "v1"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "NAME ") || !strings.Contains(got, "\nNo proxy connected: ") || !strings.Contains(got, "pylon bootstrap --node-id") {
		t.Fatalf("status without proxies:\n%s", got)
	}
}
