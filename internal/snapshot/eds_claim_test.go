package snapshot_test

import (
	"testing"

	"github.com/pylon-xds/pylon/internal/snapshot"
	"github.com/pylon-xds/pylon/internal/xds/xdstest"
	"github.com/pylon-xds/pylon/internal/xdstype"
)

// What README's "an EDS cluster without its assignment" is refused means,
// exactly: the cluster needs a ClusterLoadAssignment of its name, but one
// listing no endpoints is valid (Envoy takes it: the cluster has no hosts).
func TestEDSClusterNeedsItsAssignmentNotEndpoints(t *testing.T) {
	got := refused(t, xdstest.Cluster("a"))
	if len(got) != 1 || got[0].Name != "a" || got[0].Message != `names ClusterLoadAssignment "a", which does not exist` {
		t.Fatalf("an EDS cluster without its assignment: diagnostics %v", got)
	}

	reg := xdstype.New()
	empty := xdstest.Endpoints("a") // no ports: no endpoints
	if _, err := snapshot.Build(reg, typedInputs(t, reg, xdstest.Cluster("a"), empty)); err != nil {
		t.Fatalf("an EDS cluster whose assignment lists no endpoints was refused: %v", err)
	}
}
