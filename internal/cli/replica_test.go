package cli

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/pylon-xds/pylon/internal/pipeline"
	"github.com/pylon-xds/pylon/internal/status"
)

// The table names the replica serving each proxy; a node with streams on
// two replicas (moving between them) names both.
func TestProxyTableReplicaColumn(t *testing.T) {
	stream := func(replica, node string) fleetStream {
		return fleetStream{Replica: replica, Stream: status.Stream{Node: node, Group: "g", Types: []*status.Type{{Type: "CDS", State: status.Synced}}}}
	}
	var out bytes.Buffer
	cfg := pipeline.Status{Groups: []pipeline.GroupStatus{{Name: "g", Version: "v1"}}}
	if err := proxyTable(&out, cfg, []fleetStream{stream("pylon-b", "edge-2"), stream("pylon-a", "edge-1"), stream("pylon-c", "edge-2")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^NAME\s+GROUP\s+CDS\s+LDS\s+EDS\s+RDS\s+SDS\s+REPLICA\s+VERSION$`,
		`(?m)^edge-1\s+g\s+SYNCED(\s+-){4}\s+pylon-a\s+v1$`,
		`(?m)^edge-2\s+g\s+SYNCED(\s+-){4}\s+pylon-b,pylon-c\s+v1$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("table lacks %s:\n%s", want, out.String())
		}
	}
}
