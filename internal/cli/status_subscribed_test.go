package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// A proxyless gRPC client subscribes by name to its own listener and
// cluster and never to Secrets: `pylon status` shows the types it does not
// subscribe to as "-", not NOT SENT, and `pylon status NODE` lists as
// missing only names it asked for, never the group's other clusters.
func TestStatusCountsOnlyWhatAProxySubscribesTo(t *testing.T) {
	d := startServe(t) // the embedded quickstart: listeners http and greeter, clusters backend and greeter
	s := xdstest.OpenADS(t, xdstest.Dial(t, d.xds), xdstest.Node("app-1"))
	s.Request(xdstype.ListenerURL, "greeter")
	s.ACK(s.RecvType(xdstype.ListenerURL), "greeter")
	s.Request(xdstype.ClusterURL, "greeter")
	s.RecvType(xdstype.ClusterURL) // not ACKed: CDS stays STALE, so its difference is shown
	row := regexp.MustCompile(`(?m)^app-1\s+default\s+STALE\s+SYNCED\s+-\s+-\s+-\s`)
	var table string
	for deadline := time.Now().Add(10 * time.Second); !row.MatchString(table); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status lacks app-1's row with SDS, EDS and RDS as -:\n%s", table)
		}
		_, table, _ = d.cli("status")
	}
	out := d.must(t, "status", "app-1")
	if !regexp.MustCompile(`(?m)^\s+CDS\s+STALE`).MatchString(out) {
		t.Fatalf("status app-1 lacks CDS STALE:\n%s", out)
	}
	if strings.Contains(out, "backend") || strings.Contains(out, "not yet sent") {
		t.Errorf("status app-1 lists what app-1 never asked for:\n%s", out)
	}
}
