package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pylon-xds/pylon/internal/ctl"
)

// pylon history lists config changes only, while a revision counts every
// write to the store: an endpoint registration between two applies takes
// a number the history does not list (on etcd, lease renewals, replica
// status and other writes to the etcd cluster take numbers too). The gap
// is said, and why, on stderr (stdout stays the table); a history without
// a gap says nothing.
func TestHistorySaysWhyRevisionsSkipNumbers(t *testing.T) {
	d := startServe(t)
	d.must(t, "apply", "-f", writeDoc(t, "shop.yaml", shopConfig))
	if code, out, stderr := d.cli("history"); code != 0 || strings.Contains(stderr, ctl.HistoryGapNote) {
		t.Fatalf("history without a gap: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	d.must(t, "endpoints", "add", "shop", "10.0.0.2:8080")
	d.must(t, "apply", "-f", writeDoc(t, "shop.yaml", strings.Replace(shopConfig, "port: 10080", "port: 10081", 1)))
	code, out, stderr := d.cli("history")
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, stderr)
	}
	revs := regexp.MustCompile(`(?m)^(\d+)\s`).FindAllStringSubmatch(out, -1)
	if len(revs) < 2 || revs[0][1] == revs[1][1] {
		t.Fatalf("history lacks two entries:\n%s", out)
	}
	if !strings.Contains(stderr, ctl.HistoryGapNote) || !strings.Contains(stderr, "endpoint registrations") || !strings.Contains(stderr, "etcd") {
		t.Errorf("history with revisions %s and %s listed says nothing of the gap: stderr %q", revs[0][1], revs[1][1], stderr)
	}
	if strings.Contains(out, ctl.HistoryGapNote) {
		t.Errorf("the note is in the table on stdout:\n%s", out)
	}
}
